//! `tame guard`'s figures as series (`tame guard --metrics`): events by kind, what is on
//! the isolated CPUs now, repairs, repair failures, backoffs, passes and their duration.

use tame_guard::Metrics;

use crate::writer::{labels, Exposition, Kind, Labels, WriteError};

/// The exposition of `m`.
pub fn render(m: &Metrics) -> Result<String, WriteError> {
    let mut e = Exposition::new();
    let none = Labels::new();
    let one = |e: &mut Exposition, name: &str, kind: Kind, help: &str, v: f64| {
        e.declare(name, kind, help)?;
        e.sample(name, &none, v)
    };
    one(
        &mut e,
        "tame_guard_start_time_seconds",
        Kind::Gauge,
        "When this tame guard started, in seconds since the Unix epoch.",
        m.started_unix_ns as f64 / 1e9,
    )?;
    e.declare(
        "tame_guard_info",
        Kind::Gauge,
        "How the guard watches: mode tracepoints (they wake it early, a /proc scan every interval catches the rest) or proc_scan (the scan only).",
    )?;
    e.sample("tame_guard_info", &labels(&[("mode", &m.mode)]), 1.0)?;
    e.declare(
        "tame_guard_events_total",
        Kind::Counter,
        "Events logged since the guard started, by kind (each is one line on its standard output).",
    )?;
    for (kind, n) in &m.events {
        e.sample(
            "tame_guard_events_total",
            &labels(&[("kind", kind.name())]),
            *n as f64,
        )?;
    }
    e.declare(
        "tame_guard_stray_tasks",
        Kind::Gauge,
        "Tasks allowed on the partition's isolated CPUs now that are not its own (kernel-placed threads left out).",
    )?;
    for (p, n) in &m.strays {
        e.sample(
            "tame_guard_stray_tasks",
            &labels(&[("partition", p)]),
            *n as f64,
        )?;
    }
    one(
        &mut e,
        "tame_guard_irqs_on_isolated",
        Kind::Gauge,
        "Device IRQs firing on watched isolated CPUs now (kernel-managed ones included; drifted ones counted as drift).",
        m.irqs_on_isolated as f64,
    )?;
    one(
        &mut e,
        "tame_guard_drifted_values",
        Kind::Gauge,
        "Values apply wrote that someone else changed, now.",
        m.drifted as f64,
    )?;
    e.declare(
        "tame_guard_irq_rate_per_second",
        Kind::Gauge,
        "Interrupts per second on each watched isolated CPU over the last pass (every line of /proc/interrupts).",
    )?;
    for (cpu, rate) in &m.irq_rate {
        e.sample(
            "tame_guard_irq_rate_per_second",
            &labels(&[("cpu", &cpu.to_string())]),
            *rate as f64,
        )?;
    }
    for (name, help, v) in [
        (
            "tame_guard_repairs_total",
            "Repairs made through the journal (a task placed back, a value written again).",
            m.repairs,
        ),
        (
            "tame_guard_repair_failures_total",
            "Repairs refused (the reason is in the event's detail).",
            m.repair_failures,
        ),
        (
            "tame_guard_backoffs_total",
            "Times a thing came back too often and its repairs paused.",
            m.backoffs,
        ),
        (
            "tame_guard_passes_total",
            "Full passes made (status and interrupt rates read).",
            m.passes,
        ),
        (
            "tame_guard_wakeups_total",
            "Looks at the tasks a tracepoint named, between passes.",
            m.wakeups,
        ),
    ] {
        one(&mut e, name, Kind::Counter, help, v as f64)?;
    }
    one(
        &mut e,
        "tame_guard_pass_duration_seconds",
        Kind::Gauge,
        "How long the last pass took.",
        m.last_pass_ns as f64 / 1e9,
    )?;
    one(
        &mut e,
        "tame_guard_pass_seconds_total",
        Kind::Counter,
        "Time spent in passes since the guard started (rate() of it is the share of a CPU the passes take).",
        m.pass_ns_total as f64 / 1e9,
    )?;
    Ok(e.render())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_and_partition_has_a_series() {
        let mut m = Metrics::new(1_700_000_000_000_000_000, "tracepoints", &["rt".into()]);
        m.irq_rate.insert(1, 250);
        let text = render(&m).unwrap();
        for want in [
            "tame_guard_events_total{kind=\"task_on_isolated\"} 0",
            "tame_guard_stray_tasks{partition=\"rt\"} 0",
            "tame_guard_irq_rate_per_second{cpu=\"1\"} 250",
            "tame_guard_info{mode=\"tracepoints\"} 1",
            "# TYPE tame_guard_repairs_total counter",
        ] {
            assert!(text.contains(want), "{want} missing from:\n{text}");
        }
    }
}
