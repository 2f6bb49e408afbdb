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
        prev_prio: Option<i32>,
        next_comm: String,
        next_pid: u32,
        next_prio: Option<i32>,
    },
    Wakeup {
        comm: String,
        pid: u32,
    },
    WorkStart {
        function: String,
    },
    WorkEnd,
    HrtimerEntry {
        function: String,
    },
    HrtimerExit,
    /// `nmi_handler` is emitted when the handler returns, with its duration.
    Nmi {
        handler: String,
        delta_ns: u64,
    },
}

/// One event on one CPU; `ts` is in the trace clock's unit (see [`Timestamp`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub cpu: u32,
    pub ts: u64,
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
    let kind = parse_kind(name, fields)?;
    Some(Event { cpu, ts, kind })
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
            // Optional: attribution works without them, only fairness needs them.
            prev_prio: num(f, "prev_prio"),
            next_comm: field(f, "next_comm")?.to_string(),
            next_pid: num(f, "next_pid")?,
            next_prio: num(f, "next_prio"),
        },
        "sched_wakeup" => EventKind::Wakeup {
            comm: field(f, "comm")?.to_string(),
            pid: num(f, "pid")?,
        },
        "workqueue_execute_start" => EventKind::WorkStart {
            function: field(f, "function")
                .or_else(|| f.rsplit("function ").next())?
                .trim()
                .to_string(),
        },
        "workqueue_execute_end" => EventKind::WorkEnd,
        "hrtimer_expire_entry" => EventKind::HrtimerEntry {
            function: field(f, "function")?.to_string(),
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
                function: "tick_nohz_handler".into()
            }
        );
        assert_eq!(
            ev[8].kind,
            EventKind::Switch {
                prev_pid: 25997,
                prev_prio: Some(120),
                next_comm: "bash".into(),
                next_pid: 26005,
                next_prio: Some(120)
            }
        );
        // A comm with a space is kept whole.
        assert_eq!(
            ev[9].kind,
            EventKind::Switch {
                prev_pid: 15,
                prev_prio: Some(120),
                next_comm: "opt cgu.06".into(),
                next_pid: 25997,
                next_prio: Some(120)
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
