//! What the guard counts, for `--metrics` (rendered by tame-prometheus's `guard` module).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event::{Action, Event, Kind};

/// Counters since the guard started, and gauges of what is there now.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub started_unix_ns: u64,
    /// `tracepoints` or `proc_scan`.
    pub mode: String,
    /// Events logged, by kind (every kind present, 0 until it happens).
    pub events: BTreeMap<Kind, u64>,
    /// Stray tasks now, by watched partition (every watched partition present).
    pub strays: BTreeMap<String, u64>,
    /// Device IRQs on watched isolated CPUs now (not counting drifted ones).
    pub irqs_on_isolated: u64,
    /// Values drifted from what apply wrote, now.
    pub drifted: u64,
    /// Interrupts per second on each watched isolated CPU over the last pass.
    pub irq_rate: BTreeMap<u32, u64>,
    pub repairs: u64,
    pub repair_failures: u64,
    pub backoffs: u64,
    pub passes: u64,
    /// Tracepoint wake-ups that led to a look at the tasks they named.
    pub wakeups: u64,
    pub last_pass_ns: u64,
    pub pass_ns_total: u64,
}

impl Metrics {
    pub fn new(started_unix_ns: u64, mode: &str, partitions: &[String]) -> Self {
        Metrics {
            started_unix_ns,
            mode: mode.to_string(),
            events: Kind::ALL.iter().map(|k| (*k, 0)).collect(),
            strays: partitions.iter().map(|p| (p.clone(), 0)).collect(),
            ..Default::default()
        }
    }

    /// Count one logged event.
    pub fn count(&mut self, e: &Event) {
        *self.events.entry(e.kind).or_insert(0) += 1;
        match e.action {
            Action::Repaired => self.repairs += 1,
            Action::RepairFailed => self.repair_failures += 1,
            Action::Backoff => self.backoffs += 1,
            Action::Reported | Action::Cleared => {}
        }
    }
}
