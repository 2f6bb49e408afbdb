//! Trace events as data, and the parser for tracefs' text output
//! (`trace_pipe` / `trace` lines). Parsers take text and touch nothing.
//!
//! A line looks like
//! `      opt cgu.06-25997   [001] d.h1. 3661416945289: local_timer_entry: vector=236`:
//! the task (its comm may hold spaces, so it is split at the last `-` before
//! `[cpu]`), the CPU, the flags, the timestamp (raw counter for `x86-tsc`,
//! `secs.usecs` for the nanosecond clocks such as `mono`), the event and its fields.

use serde::{Deserialize, Serialize};

/// What happened, with the fields attribution needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    IrqEntry {
        irq: u32,
        name: String,
    },
    IrqExit {
        irq: u32,
    },
    SoftirqEntry {
        vec: u32,
        action: String,
    },
    SoftirqExit {
        vec: u32,
    },
    /// An `irq_vectors` entry: `local_timer`, `call_function`, `reschedule`, …
    VectorEntry {
        name: String,
    },
    VectorExit {
        name: String,
    },
    /// Priorities are the kernel's numbers (lower preempts: -1 deadline, 0..=98
    /// real-time, 100..=139 normal); `None` where the format has no such field.
    Switch {
        prev_pid: u32,
        /// Empty where the format has no such field (and in inferred switches).
        prev_comm: String,
        prev_prio: Option<i32>,
        /// How the previous task left the CPU; `None` where the format has no such field.
        prev_state: Option<TaskState>,
        next_comm: String,
        next_pid: u32,
        next_prio: Option<i32>,
        /// Not in the trace: put back by [`crate::idle::IdleExits`] (a switch out of
        /// idle the kernel did not trace), at idle's last event.
        inferred: bool,
    },
    Wakeup {
        comm: String,
        pid: u32,
    },
    /// `sched_waking`: emitted in the waker's context when the wakeup starts (before
    /// `sched_wakeup`), on the waker's CPU.
    Waking {
        comm: String,
        pid: u32,
        prio: Option<i32>,
        target_cpu: Option<u32>,
    },
    MigrateTask {
        pid: u32,
        orig_cpu: u32,
        dest_cpu: u32,
    },
    /// `hrtimer_start`, in the context of the task that armed it (the event's `task`). Times
    /// are on the timer's clock base (CLOCK_MONOTONIC for most): it may expire from
    /// `softexpires_ns` (the time asked for) to `expires_ns` (that plus the timer slack).
    HrtimerStart {
        hrtimer: u64,
        function: String,
        expires_ns: u64,
        softexpires_ns: u64,
    },
    WorkStart {
        function: String,
    },
    WorkEnd,
    HrtimerEntry {
        function: String,
        /// The timer's address as printed (hashed by the kernel, but stable per timer); 0 when absent.
        hrtimer: u64,
        /// The clock base's time the interrupt read before expiring its timers.
        now_ns: Option<u64>,
    },
    HrtimerExit,
    /// `nmi_handler` is emitted when the handler returns, with its duration.
    Nmi {
        handler: String,
        delta_ns: u64,
    },
    /// `raw_syscalls/sys_exit`: the task the event names returns from a system call
    /// (after a sleep, right after it was switched in).
    SysExit,
    /// `page_fault_user`: a fault taken in user mode by the event's `task`.
    PageFault,
}

/// How a task left the CPU at a switch (`prev_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// `R`/`R+`: still runnable, so it was preempted.
    Runnable,
    /// `S`: interruptible sleep (nanosleep, futex, poll, read…).
    Sleeping,
    /// `D`: uninterruptible (I/O, some locks).
    Blocked,
    /// `X`, `Z`: it exited.
    Exited,
    /// Stopped, traced, parked, idle kernel thread.
    Other,
}

impl TaskState {
    fn parse(text: &str) -> Option<Self> {
        Some(match text.trim_end_matches('+').chars().next()? {
            'R' => TaskState::Runnable,
            'S' => TaskState::Sleeping,
            'D' => TaskState::Blocked,
            'X' | 'Z' => TaskState::Exited,
            _ => TaskState::Other,
        })
    }
}

/// One event on one CPU; `ts` is in the trace clock's unit (see [`Timestamp`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub cpu: u32,
    pub ts: u64,
    /// The task running when it was emitted (the line's `comm-pid`; 0 for idle).
    pub task: u32,
    pub kind: EventKind,
}

/// How the timestamp column is written, which depends on the trace clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Timestamp {
    /// An integer counter (`x86-tsc`, `counter`): kept as is.
    Counter,
    /// `secs.usecs` (`mono`, `global`, `local`, …): converted to ns (µs resolution).
    SecsUsecs,
}

/// What a line was, when it was not an event attribution uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Event(Event),
    /// `CPU:1 [LOST 123 EVENTS]`: the ring buffer overflowed before it was read.
    Lost(u64),
    /// A header, a comment or an event attribution does not use.
    Other,
}

/// Parse one line of trace text.
pub fn parse_line(line: &str, stamp: Timestamp) -> Line {
    let line = line.trim_end();
    if let Some(n) = lost_events(line) {
        return Line::Lost(n);
    }
    if line.trim_start().starts_with('#') || line.is_empty() {
        return Line::Other;
    }
    parse_event(line, stamp).map_or(Line::Other, Line::Event)
}

fn lost_events(line: &str) -> Option<u64> {
    let rest = line.trim_start().strip_prefix("CPU:")?;
    let at = rest.find("[LOST ")?;
    rest[at + 6..].split_whitespace().next()?.parse().ok()
}

fn parse_event(line: &str, stamp: Timestamp) -> Option<Event> {
    // The CPU column is the first `[ddd]` after the task; the comm before it may contain anything.
    let open = find_cpu_column(line)?;
    let close = open + line[open..].find(']')?;
    let cpu: u32 = line[open + 1..close].trim().parse().ok()?;
    let mut rest = line[close + 1..].split_whitespace();
    let first = rest.next()?;
    // Flags (`d.h1.`) are optional on old kernels / with irq-info off.
    let ts_field = if first.ends_with(':') {
        first
    } else {
        rest.next()?
    };
    let ts = parse_timestamp(ts_field.strip_suffix(':')?, stamp)?;
    let after_ts = &line[line.find(ts_field)? + ts_field.len()..];
    let after_ts = after_ts.trim_start();
    let colon = after_ts.find(':')?;
    let name = &after_ts[..colon];
    let fields = after_ts[colon + 1..].trim();
    let task_pid = line[..open]
        .trim_end()
        .rsplit_once('-')
        .and_then(|(_, pid)| pid.parse().ok())
        .unwrap_or(0);
    let kind = parse_kind(name, fields)?;
    Some(Event {
        cpu,
        ts,
        task: task_pid,
        kind,
    })
}

fn find_cpu_column(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    let mut from = 0;
    while let Some(off) = line[from..].find('[') {
        let i = from + off;
        let j = i + line[i..].find(']')?;
        let inner = &line[i + 1..j];
        // `[001]` preceded by whitespace: the CPU column (a comm like `kworker/u4:[x]` is not).
        if !inner.is_empty()
            && inner.bytes().all(|b| b.is_ascii_digit())
            && i > 0
            && bytes[i - 1].is_ascii_whitespace()
        {
            return Some(i);
        }
        from = i + 1;
    }
    None
}

fn parse_timestamp(text: &str, stamp: Timestamp) -> Option<u64> {
    match stamp {
        Timestamp::Counter => text.parse().ok(),
        Timestamp::SecsUsecs => {
            let (s, us) = text.split_once('.')?;
            let secs: u64 = s.parse().ok()?;
            // Always 6 digits, but be lenient.
            let digits = us.len() as u32;
            let frac: u64 = us.parse().ok()?;
            let ns = if digits <= 9 {
                frac * 10u64.pow(9 - digits)
            } else {
                frac / 10u64.pow(digits - 9)
            };
            Some(secs * 1_000_000_000 + ns)
        }
    }
}

/// `key=value` where values run to the next ` key=` (values such as comms may hold spaces).
fn field<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("{key}=");
    let mut start = None;
    let mut from = 0;
    while let Some(off) = fields[from..].find(&pat) {
        let i = from + off;
        if i == 0 || fields.as_bytes()[i - 1] == b' ' || fields.as_bytes()[i - 1] == b'[' {
            start = Some(i + pat.len());
            break;
        }
        from = i + 1;
    }
    let start = start?;
    let tail = &fields[start..];
    // The value ends where the next ` word=` begins (or at ` ==>` / `]`).
    let mut end = tail.len();
    for (i, _) in tail.match_indices(' ') {
        let next = &tail[i + 1..];
        let word_end = next.find([' ', '=']).unwrap_or(next.len());
        if next.starts_with("==>") || next[word_end..].starts_with('=') {
            end = i;
            break;
        }
    }
    Some(tail[..end].trim_end_matches(']'))
}

fn num<T: std::str::FromStr>(fields: &str, key: &str) -> Option<T> {
    field(fields, key)?.trim().parse().ok()
}

/// `0000000012ab34cd` (a `%p`) as a number.
fn hex(fields: &str, key: &str) -> Option<u64> {
    let v = field(fields, key)?.trim();
    u64::from_str_radix(v.trim_start_matches("0x"), 16).ok()
}

fn parse_kind(name: &str, f: &str) -> Option<EventKind> {
    Some(match name {
        "irq_handler_entry" => EventKind::IrqEntry {
            irq: num(f, "irq")?,
            name: field(f, "name")?.to_string(),
        },
        "irq_handler_exit" => EventKind::IrqExit {
            irq: num(f, "irq")?,
        },
        "softirq_entry" => EventKind::SoftirqEntry {
            vec: num(f, "vec")?,
            action: field(f, "action").unwrap_or("?").to_string(),
        },
        "softirq_exit" => EventKind::SoftirqExit {
            vec: num(f, "vec")?,
        },
        "sched_switch" => EventKind::Switch {
            prev_pid: num(f, "prev_pid")?,
            prev_comm: field(f, "prev_comm").unwrap_or("").to_string(),
            // Optional: attribution works without them, only fairness needs them.
            prev_prio: num(f, "prev_prio"),
            prev_state: field(f, "prev_state").and_then(TaskState::parse),
            next_comm: field(f, "next_comm")?.to_string(),
            next_pid: num(f, "next_pid")?,
            next_prio: num(f, "next_prio"),
            inferred: false,
        },
        "sched_wakeup" => EventKind::Wakeup {
            comm: field(f, "comm")?.to_string(),
            pid: num(f, "pid")?,
        },
        "sched_waking" => EventKind::Waking {
            comm: field(f, "comm")?.to_string(),
            pid: num(f, "pid")?,
            prio: num(f, "prio"),
            target_cpu: num(f, "target_cpu"),
        },
        "sched_migrate_task" => EventKind::MigrateTask {
            pid: num(f, "pid")?,
            orig_cpu: num(f, "orig_cpu")?,
            dest_cpu: num(f, "dest_cpu")?,
        },
        "hrtimer_start" => EventKind::HrtimerStart {
            hrtimer: hex(f, "hrtimer")?,
            function: field(f, "function")?.to_string(),
            expires_ns: num(f, "expires")?,
            softexpires_ns: num(f, "softexpires").or_else(|| num(f, "expires"))?,
        },
        "page_fault_user" => EventKind::PageFault,
        "sys_exit" => EventKind::SysExit,
        "workqueue_execute_start" => EventKind::WorkStart {
            function: field(f, "function")
                .or_else(|| f.rsplit("function ").next())?
                .trim()
                .to_string(),
        },
        "workqueue_execute_end" => EventKind::WorkEnd,
        "hrtimer_expire_entry" => EventKind::HrtimerEntry {
            function: field(f, "function")?.to_string(),
            hrtimer: hex(f, "hrtimer").unwrap_or(0),
            now_ns: num(f, "now"),
        },
        "hrtimer_expire_exit" => EventKind::HrtimerExit,
        "nmi_handler" => EventKind::Nmi {
            handler: field(f, "handler")?.to_string(),
            delta_ns: num(f, "delta_ns")?,
        },
        _ => {
            if let Some(v) = name.strip_suffix("_entry") {
                // irq_vectors: local_timer_entry, call_function_single_entry, …
                if f.starts_with("vector=") {
                    return Some(EventKind::VectorEntry {
                        name: v.to_string(),
                    });
                }
            }
            if let Some(v) = name.strip_suffix("_exit") {
                if f.starts_with("vector=") {
                    return Some(EventKind::VectorExit {
                        name: v.to_string(),
                    });
                }
            }
            return None;
        }
    })
}

/// Parse a block of text, keeping events and counting lost ones.
pub fn parse_text(text: &str, stamp: Timestamp, events: &mut Vec<Event>) -> u64 {
    let mut lost = 0;
    for line in text.lines() {
        match parse_line(line, stamp) {
            Line::Event(e) => events.push(e),
            Line::Lost(n) => lost += n,
            Line::Other => {}
        }
    }
    lost
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured on this project's development VM (kernel 6.18), trace clock x86-tsc.
    const CAPTURED: &str = r#"            bash-26005   [001] d.h1. 3661416945289: local_timer_entry: vector=236
            bash-26005   [001] dNh1. 3661417020169: local_timer_exit: vector=236
            bash-26005   [001] .Ns1. 3661417022067: softirq_entry: vec=9 [action=RCU]
            bash-26005   [001] .Ns1. 3661417036809: softirq_exit: vec=9 [action=RCU]
            bash-26005   [001] dnh.. 3661427404323: hrtimer_expire_entry: hrtimer=000000003eafb760 function=tick_nohz_handler now=1410252039297
            bash-26005   [001] dnh.. 3661427494673: hrtimer_expire_exit: hrtimer=000000003eafb760
            bash-26005   [001] dnH.. 3661427540485: reschedule_entry: vector=253
            bash-26005   [001] dNH.. 3661427542279: reschedule_exit: vector=253
      opt cgu.06-25997   [001] d..2. 3661458618701: sched_switch: prev_comm=opt cgu.06 prev_pid=25997 prev_prio=120 prev_state=R ==> next_comm=bash next_pid=26005 next_prio=120
     rcu_preempt-15      [001] d..2. 3661448330579: sched_switch: prev_comm=rcu_preempt prev_pid=15 prev_prio=120 prev_state=I ==> next_comm=opt cgu.06 next_pid=25997 next_prio=120
            bash-26005   [001] ...1. 3661460126311: ipi_send_cpu: cpu=0 callsite=on_each_cpu_cond_mask+0x20/0x60 callback=generic_smp_call_function_single_interrupt+0x0/0x10
"#;

    #[test]
    fn captured_tsc_lines_parse_with_their_fields() {
        let mut ev = Vec::new();
        assert_eq!(parse_text(CAPTURED, Timestamp::Counter, &mut ev), 0);
        assert_eq!(ev.len(), 10, "ipi_send_cpu is not used: {ev:#?}");
        assert_eq!(
            ev[0],
            Event {
                cpu: 1,
                ts: 3661416945289,
                task: 26005,
                kind: EventKind::VectorEntry {
                    name: "local_timer".into()
                }
            }
        );
        assert_eq!(
            ev[2].kind,
            EventKind::SoftirqEntry {
                vec: 9,
                action: "RCU".into()
            }
        );
        assert_eq!(
            ev[4].kind,
            EventKind::HrtimerEntry {
                function: "tick_nohz_handler".into(),
                hrtimer: 0x3eafb760,
                now_ns: Some(1410252039297)
            }
        );
        assert_eq!(
            ev[8].kind,
            EventKind::Switch {
                prev_pid: 25997,
                prev_comm: "opt cgu.06".into(),
                prev_prio: Some(120),
                prev_state: Some(TaskState::Runnable),
                next_comm: "bash".into(),
                next_pid: 26005,
                next_prio: Some(120),
                inferred: false,
            }
        );
        // A comm with a space is kept whole.
        assert_eq!(
            ev[9].kind,
            EventKind::Switch {
                prev_pid: 15,
                prev_comm: "rcu_preempt".into(),
                prev_prio: Some(120),
                prev_state: Some(TaskState::Other),
                next_comm: "opt cgu.06".into(),
                next_pid: 25997,
                next_prio: Some(120),
                inferred: false,
            }
        );
    }

    #[test]
    fn irq_workqueue_wakeup_and_nmi_lines_parse() {
        let text = "\
          <idle>-0       [001] d.h2.   812.345678: irq_handler_entry: irq=36 name=virtio1-req.0
          <idle>-0       [001] d.h2.   812.345690: irq_handler_exit: irq=36 ret=handled
     kworker/1:1-61      [001] .....   812.400001: workqueue_execute_start: work struct 00000000b1a3a0c4: function vmstat_update
     kworker/1:1-61      [001] .....   812.400009: workqueue_execute_end: work struct 00000000b1a3a0c4: function vmstat_update
          <idle>-0       [001] dNh4.   812.500000: sched_wakeup: comm=tame-noise pid=4242 prio=49 target_cpu=001
          <idle>-0       [001] d.h1.   812.600000: nmi_handler: handler=perf_event_nmi_handler delta_ns=2345 handled=1
CPU:1 [LOST 17 EVENTS]
";
        let mut ev = Vec::new();
        assert_eq!(parse_text(text, Timestamp::SecsUsecs, &mut ev), 17);
        assert_eq!(ev[0].ts, 812_345_678_000);
        assert_eq!(
            ev[0].kind,
            EventKind::IrqEntry {
                irq: 36,
                name: "virtio1-req.0".into()
            }
        );
        assert_eq!(ev[1].kind, EventKind::IrqExit { irq: 36 });
        assert_eq!(
            ev[2].kind,
            EventKind::WorkStart {
                function: "vmstat_update".into()
            }
        );
        assert_eq!(ev[3].kind, EventKind::WorkEnd);
        assert_eq!(
            ev[4].kind,
            EventKind::Wakeup {
                comm: "tame-noise".into(),
                pid: 4242
            }
        );
        assert_eq!(
            ev[5].kind,
            EventKind::Nmi {
                handler: "perf_event_nmi_handler".into(),
                delta_ns: 2345
            }
        );
    }

    /// Priorities as the kernel prints them: a real-time thread, the stop class (which
    /// prints 0), a deadline task, an old format without them and a garbled value.
    #[test]
    fn switch_priorities_parse_and_are_optional() {
        let text = "\
          <idle>-0       [003] d..2.   900.000001: sched_switch: prev_comm=swapper/3 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=irq/36-virtio1 next_pid=311 next_prio=49
  irq/36-virtio1-311     [003] d..2.   900.000009: sched_switch: prev_comm=irq/36-virtio1 prev_pid=311 prev_prio=49 prev_state=S ==> next_comm=migration/3 next_pid=27 next_prio=0
     migration/3-27      [003] d..2.   900.000012: sched_switch: prev_comm=migration/3 prev_pid=27 prev_prio=0 prev_state=S ==> next_comm=dl-task next_pid=900 next_prio=-1
         dl-task-900     [003] d..2.   900.000020: sched_switch: prev_comm=dl-task prev_pid=900 prev_state=S ==> next_comm=old next_pid=901
             old-901     [003] d..2.   900.000030: sched_switch: prev_comm=old prev_pid=901 prev_prio=x7 prev_state=S ==> next_comm=big next_pid=902 next_prio=99999999999
";
        let mut ev = Vec::new();
        parse_text(text, Timestamp::SecsUsecs, &mut ev);
        let prios: Vec<(Option<i32>, &str, Option<i32>)> = ev
            .iter()
            .map(|e| match &e.kind {
                EventKind::Switch {
                    prev_prio,
                    next_comm,
                    next_prio,
                    ..
                } => (*prev_prio, next_comm.as_str(), *next_prio),
                other => panic!("not a switch: {other:?}"),
            })
            .collect();
        assert_eq!(
            prios,
            vec![
                (Some(120), "irq/36-virtio1", Some(49)),
                (Some(49), "migration/3", Some(0)),
                (Some(0), "dl-task", Some(-1)),
                (None, "old", None),
                (None, "big", None),
            ]
        );
    }

    /// The events `tame watch` follows a thread with, as this VM's kernel prints them.
    #[test]
    fn watch_events_parse_with_the_task_that_emitted_them() {
        let text = "\
      cyclictest-4411    [001] d..1.  3661400000000: hrtimer_start: hrtimer=00000000a1b2c3d4 function=hrtimer_wakeup expires=1410250000000 softexpires=1410250000000 mode=ABS was_armed=0
      cyclictest-4411    [001] d..2.  3661400000100: sched_switch: prev_comm=cyclictest prev_pid=4411 prev_prio=19 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0       [001] d.h1.  3661450000000: hrtimer_expire_entry: hrtimer=00000000a1b2c3d4 function=hrtimer_wakeup now=1410250004000
          <idle>-0       [001] d.h2.  3661450000200: sched_waking: comm=cyclictest pid=4411 prio=19 target_cpu=001
 kworker/u4:[x]-77       [000] d..2.  3661450000300: sched_migrate_task: comm=kworker/u4:3 pid=78 prio=120 orig_cpu=1 dest_cpu=0
      cyclictest-4411    [001] .....  3661450009000: page_fault_user: address=0x7f00 ip=0x5500 error_code=0x6
";
        let mut ev = Vec::new();
        parse_text(text, Timestamp::Counter, &mut ev);
        // The timer start and the fault are the loop's own: the task that emitted them.
        assert_eq!((ev[0].task, ev[5].task, ev[2].task), (4411, 4411, 0));
        let kinds: Vec<_> = ev.iter().map(|e| e.kind.clone()).collect();
        assert_eq!(
            kinds,
            vec![
                EventKind::HrtimerStart {
                    hrtimer: 0xa1b2c3d4,
                    function: "hrtimer_wakeup".into(),
                    expires_ns: 1410250000000,
                    softexpires_ns: 1410250000000,
                },
                EventKind::Switch {
                    prev_pid: 4411,
                    prev_comm: "cyclictest".into(),
                    prev_prio: Some(19),
                    prev_state: Some(TaskState::Sleeping),
                    next_comm: "swapper/1".into(),
                    next_pid: 0,
                    next_prio: Some(120),
                    inferred: false,
                },
                EventKind::HrtimerEntry {
                    function: "hrtimer_wakeup".into(),
                    hrtimer: 0xa1b2c3d4,
                    now_ns: Some(1410250004000)
                },
                EventKind::Waking {
                    comm: "cyclictest".into(),
                    pid: 4411,
                    prio: Some(19),
                    target_cpu: Some(1)
                },
                EventKind::MigrateTask {
                    pid: 78,
                    orig_cpu: 1,
                    dest_cpu: 0
                },
                EventKind::PageFault,
            ]
        );
    }

    #[test]
    fn headers_and_garbage_are_not_events() {
        for line in [
            "# tracer: nop",
            "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION",
            "",
            "half a line [00",
            "   x-1 [001] d.... notatime: local_timer_entry: vector=236",
        ] {
            assert_eq!(parse_line(line, Timestamp::Counter), Line::Other, "{line}");
        }
    }
}
