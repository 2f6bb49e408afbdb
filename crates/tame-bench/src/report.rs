//! Turning measuring threads' outputs into the result's groups.

use std::collections::BTreeMap;

use crate::cycle::CycleOutput;
use crate::distribution::Distribution;
use crate::fwq::FwqOutput;
use crate::result::{GroupResult, Metric};
use crate::sleep::SleepOutput;
use crate::stats::Recorder;
use crate::timeline::Timeline;

/// A measuring thread's output, seen as named recorders and counters.
pub trait GroupSource {
    fn cpu(&self) -> Option<u32>;
    /// (metric name, unit, recorder); the first is the bench's primary metric.
    fn recorders(&self) -> Vec<(&'static str, &'static str, &Recorder)>;
    fn counters(&self) -> Vec<(&'static str, u64)>;
    /// Raw samples kept, if any.
    fn samples(&self) -> &crate::measure::SampleBuffer;
    /// The primary metric over the run, where the bench keeps one.
    fn timeline(&self) -> Option<Timeline> {
        None
    }
}

impl GroupSource for CycleOutput {
    fn cpu(&self) -> Option<u32> {
        self.cpu
    }
    fn recorders(&self) -> Vec<(&'static str, &'static str, &Recorder)> {
        vec![
            ("latency", "ns", &self.latency),
            ("wakeup_latency", "ns", &self.wakeup_latency),
            ("period_deviation", "ns", &self.period_deviation),
        ]
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("missed_periods", self.missed),
            ("samples_dropped", self.samples.dropped()),
        ]
    }
    fn samples(&self) -> &crate::measure::SampleBuffer {
        &self.samples
    }
    fn timeline(&self) -> Option<Timeline> {
        Some(self.timeline.timeline("latency", "ns"))
    }
}

impl GroupSource for SleepOutput {
    fn cpu(&self) -> Option<u32> {
        self.cpu
    }
    fn recorders(&self) -> Vec<(&'static str, &'static str, &Recorder)> {
        vec![("jitter", "ns", &self.jitter)]
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("early_wakeups", self.early),
            ("interrupted_sleeps", self.interrupted_sleeps),
            ("samples_dropped", self.samples.dropped()),
        ]
    }
    fn samples(&self) -> &crate::measure::SampleBuffer {
        &self.samples
    }
    fn timeline(&self) -> Option<Timeline> {
        Some(self.timeline.timeline("jitter", "ns"))
    }
}

impl GroupSource for FwqOutput {
    fn cpu(&self) -> Option<u32> {
        self.cpu
    }
    fn recorders(&self) -> Vec<(&'static str, &'static str, &Recorder)> {
        let mut r = vec![
            ("excess", "ns", &self.excess),
            ("duration", "ns", &self.duration),
        ];
        if let Some(c) = &self.excess_cycles {
            r.push(("excess_cycles", "cycles", c));
        }
        r
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("work_iterations", self.work_iterations),
            ("samples_dropped", self.samples.dropped()),
        ]
    }
    fn samples(&self) -> &crate::measure::SampleBuffer {
        &self.samples
    }
    fn timeline(&self) -> Option<Timeline> {
        self.timeline.clone()
    }
}

/// Counters that describe a thread rather than count its events: merged by maximum.
const NON_ADDITIVE_COUNTERS: &[&str] = &["work_iterations"];

/// Per-thread groups (labelled `{prefix}{index or cpu}`) and their merge.
pub fn groups<T: GroupSource>(
    outputs: &[T],
    label_by_cpu: bool,
) -> (Vec<GroupResult>, GroupResult) {
    let mut merged_recorders: Vec<(&'static str, &'static str, Recorder)> = Vec::new();
    let mut merged_counters: BTreeMap<String, u64> = BTreeMap::new();
    let mut groups = Vec::with_capacity(outputs.len());
    for (i, out) in outputs.iter().enumerate() {
        let label = match (label_by_cpu, out.cpu()) {
            (true, Some(cpu)) => format!("cpu{cpu}"),
            _ => format!("task{i}"),
        };
        let mut metrics = Vec::new();
        for (j, (name, unit, rec)) in out.recorders().into_iter().enumerate() {
            metrics.push(Metric {
                name: name.to_string(),
                unit: unit.to_string(),
                summary: rec.summary(),
                distribution: Some(Distribution::of(rec)),
            });
            match merged_recorders.get_mut(j) {
                Some((_, _, m)) => m.merge(rec),
                None => merged_recorders.push((name, unit, rec.clone())),
            }
        }
        let counters: BTreeMap<String, u64> = out
            .counters()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        for (k, v) in &counters {
            let entry = merged_counters.entry(k.clone()).or_default();
            // Event counts add up across threads; settings-like counts do not.
            if NON_ADDITIVE_COUNTERS.contains(&k.as_str()) {
                *entry = (*entry).max(*v);
            } else {
                *entry += v;
            }
        }
        groups.push(GroupResult {
            label,
            cpu: out.cpu(),
            metrics,
            counters,
            derived: BTreeMap::new(),
            spread: BTreeMap::new(),
            timeline: out.timeline(),
            not_measured: None,
        });
    }
    let merged = GroupResult {
        label: "all".into(),
        cpu: None,
        metrics: merged_recorders
            .iter()
            .map(|(name, unit, rec)| Metric {
                name: name.to_string(),
                unit: unit.to_string(),
                summary: rec.summary(),
                distribution: Some(Distribution::of(rec)),
            })
            .collect(),
        counters: merged_counters,
        derived: BTreeMap::new(),
        spread: BTreeMap::new(),
        timeline: None,
        not_measured: None,
    };
    (groups, merged)
}

/// The merged group's figures: the worst group's value of each, since a
/// percentage of one CPU's quantum means nothing against another CPU's.
pub fn worst_derived(groups: &[GroupResult], merged: &mut GroupResult) {
    for g in groups {
        for (k, v) in &g.derived {
            let entry = merged.derived.entry(k.clone()).or_insert(*v);
            *entry = entry.max(*v);
        }
    }
}

/// FWQ's dimensionless figures: excess as a share of the quantum (the fastest sample).
pub fn fwq_derived(group: &mut GroupResult, noise_share_ppm: Option<u64>) {
    let (Some(excess), Some(duration)) = (group.metric("excess"), group.metric("duration")) else {
        return;
    };
    let quantum = duration.summary.min.max(1) as f64;
    let pct = |v: u64| v as f64 * 100.0 / quantum;
    let e = excess.summary;
    // A percentile's share only where the samples support the percentile.
    let figures = [
        ("max_excess_percent", pct(e.max), None),
        ("p99_excess_percent", pct(e.p99), Some(0.99)),
        ("p99_999_excess_percent", pct(e.p99_999), Some(0.99999)),
        ("mean_excess_percent", pct(e.mean), None),
    ];
    for (k, v, q) in figures {
        if q.is_none_or(|q| e.supports(q)) {
            group.derived.insert(k.into(), v);
        }
    }
    if let Some(ppm) = noise_share_ppm {
        group
            .derived
            .insert("noise_share_percent".into(), ppm as f64 / 10_000.0);
    }
}
