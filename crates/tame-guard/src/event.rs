//! One event, one line: what happened, where, to which task, IRQ or value, and what the
//! guard did about it, as logfmt (`ts=… event=task_on_isolated cpu=1 pid=123 comm=foo
//! partition=rt action=reported`).

use serde::{Deserialize, Serialize};
use tame_host::CpuList;

/// What was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The guard started (its mode: tracepoints or a /proc scan, and why).
    Started,
    /// The guard stopped (a signal, or the partition was reverted).
    Stopped,
    /// A task other than the partitions' own is allowed on an isolated CPU.
    TaskOnIsolated,
    /// Such a task is gone or no longer allowed there.
    TaskOffIsolated,
    /// A device IRQ fires on (or is pinned to) an isolated CPU, outside what apply wrote.
    IrqOnIsolated,
    IrqOffIsolated,
    /// A value apply wrote was changed by someone else (IRQ affinity, workqueue cpumask,
    /// cpuset, sysctl knob).
    Drift,
    DriftGone,
    /// An isolated CPU takes more interrupts per second than the threshold.
    IrqRateHigh,
    IrqRateNormal,
}

impl Kind {
    /// Every kind, in the order the metrics list them.
    pub const ALL: [Kind; 10] = [
        Kind::Started,
        Kind::Stopped,
        Kind::TaskOnIsolated,
        Kind::TaskOffIsolated,
        Kind::IrqOnIsolated,
        Kind::IrqOffIsolated,
        Kind::Drift,
        Kind::DriftGone,
        Kind::IrqRateHigh,
        Kind::IrqRateNormal,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Started => "started",
            Kind::Stopped => "stopped",
            Kind::TaskOnIsolated => "task_on_isolated",
            Kind::TaskOffIsolated => "task_off_isolated",
            Kind::IrqOnIsolated => "irq_on_isolated",
            Kind::IrqOffIsolated => "irq_off_isolated",
            Kind::Drift => "drift",
            Kind::DriftGone => "drift_gone",
            Kind::IrqRateHigh => "irq_rate_high",
            Kind::IrqRateNormal => "irq_rate_normal",
        }
    }

    /// The kind that reports this one going away.
    pub fn gone(self) -> Kind {
        match self {
            Kind::TaskOnIsolated => Kind::TaskOffIsolated,
            Kind::IrqOnIsolated => Kind::IrqOffIsolated,
            Kind::Drift => Kind::DriftGone,
            Kind::IrqRateHigh => Kind::IrqRateNormal,
            other => other,
        }
    }
}

/// What the guard did about it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Reported only (no --repair, nothing to repair, or a repair backing off).
    #[default]
    Reported,
    /// Put back, through the journal.
    Repaired,
    /// The repair was refused (the reason is in `detail`).
    RepairFailed,
    /// It came back too often: repairs pause until `detail` says.
    Backoff,
    /// It went away.
    Cleared,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Reported => "reported",
            Action::Repaired => "repaired",
            Action::RepairFailed => "repair_failed",
            Action::Backoff => "backoff",
            Action::Cleared => "cleared",
        }
    }
}

/// One event. Fields that do not apply stay `None` and are left out of the line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// When, in nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    pub kind: Kind,
    pub action: Action,
    /// The isolated CPUs concerned (a task's allowed CPUs among them, an IRQ's, a rate's CPU).
    pub cpu: Option<CpuList>,
    pub partition: Option<String>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub comm: Option<String>,
    pub cpus_allowed: Option<CpuList>,
    pub irq: Option<u32>,
    /// The IRQ's name.
    pub name: Option<String>,
    pub managed: Option<bool>,
    /// A drifted file (host path), the value apply wrote, the value now.
    pub path: Option<String>,
    pub applied: Option<String>,
    pub now: Option<String>,
    /// Interrupts per second on `cpu`, and the threshold.
    pub rate: Option<u64>,
    pub threshold: Option<u64>,
    /// How the guard learned of it: `scan` (a periodic pass) or `tracepoint`.
    pub source: Option<String>,
    /// Why (a refused repair's error, a backoff's end, the guard's mode).
    pub detail: Option<String>,
}

impl Event {
    pub fn new(kind: Kind) -> Self {
        Event {
            ts_ns: 0,
            kind,
            action: Action::Reported,
            cpu: None,
            partition: None,
            pid: None,
            tid: None,
            comm: None,
            cpus_allowed: None,
            irq: None,
            name: None,
            managed: None,
            path: None,
            applied: None,
            now: None,
            rate: None,
            threshold: None,
            source: None,
            detail: None,
        }
    }

    /// The event as one logfmt line (no newline).
    pub fn logfmt(&self) -> String {
        let mut fields: Vec<(&str, String)> = vec![
            ("ts", tame_host::utc::rfc3339(self.ts_ns)),
            ("event", self.kind.name().to_string()),
        ];
        let mut opt = |k: &'static str, v: Option<String>| {
            if let Some(v) = v {
                fields.push((k, v));
            }
        };
        opt("cpu", self.cpu.as_ref().map(CpuList::to_string));
        opt("partition", self.partition.clone());
        opt("pid", self.pid.map(|v| v.to_string()));
        opt("tid", self.tid.map(|v| v.to_string()));
        opt("comm", self.comm.clone());
        opt(
            "cpus_allowed",
            self.cpus_allowed.as_ref().map(CpuList::to_string),
        );
        opt("irq", self.irq.map(|v| v.to_string()));
        opt("name", self.name.clone());
        opt("managed", self.managed.map(|v| v.to_string()));
        opt("path", self.path.clone());
        opt("applied", self.applied.clone());
        opt("now", self.now.clone());
        opt("rate", self.rate.map(|v| v.to_string()));
        opt("threshold", self.threshold.map(|v| v.to_string()));
        opt("source", self.source.clone());
        fields.push(("action", self.action.name().to_string()));
        if let Some(d) = &self.detail {
            fields.push(("detail", d.clone()));
        }
        fields
            .iter()
            .map(|(k, v)| format!("{k}={}", quote(v)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A logfmt value: bare when it is a plain word, else double-quoted with `"`, `\` and
/// control characters escaped.
pub fn quote(v: &str) -> String {
    let plain = !v.is_empty()
        && v.chars()
            .all(|c| !c.is_whitespace() && !c.is_control() && c != '"' && c != '=' && c != '\\');
    if plain {
        return v.to_string();
    }
    let mut out = String::with_capacity(v.len() + 2);
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_event_is_one_logfmt_line() {
        let mut e = Event::new(Kind::TaskOnIsolated);
        e.ts_ns = 1_709_210_096_789_000_000;
        e.cpu = Some(CpuList::parse("1").unwrap());
        e.partition = Some("rt".into());
        e.pid = Some(123);
        e.tid = Some(123);
        e.comm = Some("my prog".into());
        e.source = Some("scan".into());
        assert_eq!(
            e.logfmt(),
            "ts=2024-02-29T12:34:56.789Z event=task_on_isolated cpu=1 partition=rt pid=123 tid=123 comm=\"my prog\" source=scan action=reported"
        );
    }

    #[test]
    fn values_are_quoted_when_they_must_be() {
        assert_eq!(quote("0-1"), "0-1");
        assert_eq!(quote(""), "\"\"");
        assert_eq!(quote("a=b"), "\"a=b\"");
        assert_eq!(quote("say \"hi\"\n"), "\"say \\\"hi\\\"\\n\"");
        assert_eq!(quote("x\\y"), "\"x\\\\y\"");
    }

    #[test]
    fn every_kind_has_a_distinct_name() {
        let names: std::collections::BTreeSet<_> = Kind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), Kind::ALL.len());
    }
}
