//! The result schema every bench writes. A result is data first: the human
//! table, the cyclictest-style histogram and `tame compare` are views of it.
//! The layout is documented in docs/results.md; bump its schema (`impl Document for BenchResult`) on any
//! change that an old reader would misread.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tame_host::environment::RunEnvironment;
use tame_rt::ClockKind;

use crate::distribution::Distribution;
use crate::load::LoadDescription;
use crate::stats::Summary;
use crate::timeline::Timeline;

impl<S> tame_host::Document for BenchResult<S> {
    const SCHEMA: tame_host::Schema = tame_host::schema!(BenchVersion "tame.bench", 1);
}

/// One run of one bench. `S` is the bench's own settings; readers that do not
/// know the bench use `serde_json::Value`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchResult<S = serde_json::Value> {
    pub schema_version: u32,
    /// cycle | sleep | fwq | ipc | noise | ...
    pub bench: String,
    pub tool_version: String,
    /// The exact command line that produced this result.
    pub command_line: Vec<String>,
    /// Wall-clock start, ns since the Unix epoch.
    pub started_unix_ns: u64,
    /// Time from the first to the last measurement, ns.
    pub elapsed_ns: u64,
    /// True when Ctrl-C stopped the run early: the numbers cover what was measured.
    pub interrupted: bool,
    pub environment: RunEnvironment,
    pub calibration: Calibration,
    /// The background load that ran, if any.
    pub load: Option<LoadDescription>,
    /// The applied partition the measuring threads ran in (`-p`), if any.
    #[serde(default)]
    pub partition: Option<String>,
    pub settings: S,
    /// One group per measuring thread (per CPU or per task).
    pub groups: Vec<GroupResult>,
    /// All groups merged, metric by metric.
    pub merged: GroupResult,
}

/// How the measuring clock behaves on this machine, measured at the start of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Calibration {
    pub clock: Option<ClockKind>,
    /// Median cost of one clock read, ns.
    pub clock_read_cost_ns: u64,
    /// Minimum time of one iteration of a tight clock-reading loop, ns.
    pub loop_floor_ns: u64,
    /// TSC rate where the TSC clock is used or cycles are reported.
    pub tsc_hz: Option<u64>,
}

/// The results of one measuring thread (or of all merged).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupResult {
    /// "cpu0", "task3", "all".
    pub label: String,
    /// The CPU the thread was pinned to, if it was.
    pub cpu: Option<u32>,
    pub metrics: Vec<Metric>,
    /// Event counts such as `missed_periods`.
    pub counters: BTreeMap<String, u64>,
    /// Dimensionless figures derived from the metrics, such as `max_excess_percent`.
    pub derived: BTreeMap<String, f64>,
    /// How much a figure varied between repetitions inside the run (ipc: its rounds), keyed
    /// by the figure's name as `tame compare` writes it (`one_way_latency p50`, or a derived
    /// or counter name). Empty, and left out of the JSON, where the run has no repetitions.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spread: BTreeMap<String, Spread>,
    /// The primary metric over the run, per window (cycle, sleep, fwq; noise: the gaps);
    /// absent in older results, in merged groups and in benches without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
    /// Why this group holds no figures, where the run stopped before measuring it (ipc: a
    /// transport and size Ctrl-C came before); absent for every group that was measured.
    /// Readers show it as not measured, never as zeros.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_measured: Option<String>,
}

/// The smallest and largest value a figure took over a run's repetitions.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// A spread of one value so far.
    pub fn of(value: f64) -> Self {
        Spread {
            min: value,
            max: value,
        }
    }

    /// Widen it to cover `value`.
    pub fn include(&mut self, value: f64) {
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    /// Whether the two ranges share a value.
    pub fn overlaps(&self, other: &Spread) -> bool {
        self.min <= other.max && other.min <= self.max
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metric {
    /// e.g. "latency", "period_deviation", "jitter", "excess".
    pub name: String,
    /// "ns" or "cycles".
    pub unit: String,
    pub summary: Summary,
    /// The whole distribution in log bins (for histograms and tail curves); absent in
    /// results written before it was added and where no histogram was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<Distribution>,
}

impl GroupResult {
    pub fn metric(&self, name: &str) -> Option<&Metric> {
        self.metrics.iter().find(|m| m.name == name)
    }
}

impl<S: Serialize> BenchResult<S> {
    pub fn to_json(&self) -> String {
        crate::json::pretty(self).expect("results serialise: all keys are strings")
    }
}

/// Wall-clock now, ns since the Unix epoch.
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cycle::CycleSettings;
    use crate::engine::ThreadSettings;
    use crate::stats::Recorder;
    use tame_host::CpuList;
    use tame_rt::Policy;

    fn sample_result() -> BenchResult<CycleSettings> {
        let mut r = Recorder::new();
        [12_000u64, 15_000, 90_000]
            .iter()
            .for_each(|&v| r.record(v));
        let group = GroupResult {
            label: "cpu1".into(),
            cpu: Some(1),
            metrics: vec![Metric {
                name: "latency".into(),
                unit: "ns".into(),
                summary: r.summary(),
                distribution: Some(crate::distribution::Distribution::of(&r)),
            }],
            counters: [("missed_periods".to_string(), 2)].into_iter().collect(),
            derived: BTreeMap::new(),
            spread: BTreeMap::new(),
            timeline: None,
            not_measured: None,
        };
        BenchResult {
            schema_version: <BenchResult as tame_host::Document>::SCHEMA.version,
            bench: "cycle".into(),
            tool_version: "0.1.0".into(),
            command_line: vec!["tame".into(), "bench".into(), "cycle".into()],
            started_unix_ns: 1,
            elapsed_ns: 2,
            interrupted: false,
            environment: RunEnvironment::default(),
            calibration: Calibration {
                clock: Some(ClockKind::Monotonic),
                clock_read_cost_ns: 25,
                loop_floor_ns: 20,
                tsc_hz: None,
            },
            load: None,
            partition: None,
            settings: CycleSettings {
                cpus: CpuList::parse("1").unwrap(),
                interval_ns: 1_000_000,
                loops: 3,
                threads: ThreadSettings {
                    policy: Policy::Fifo,
                    priority: 95,
                    mlock: true,
                    clock: ClockKind::Monotonic,
                },
                busy_wait: false,
                dma_latency_us: None,
            },
            groups: vec![group.clone()],
            merged: GroupResult {
                label: "all".into(),
                ..group
            },
        }
    }

    #[test]
    fn round_trips_typed_and_untyped() {
        let result = sample_result();
        let json = result.to_json();
        let typed: BenchResult<CycleSettings> = serde_json::from_str(&json).unwrap();
        assert_eq!(typed, result);
        // A reader that does not know the bench still gets everything but the typed settings.
        let untyped: BenchResult = serde_json::from_str(&json).unwrap();
        assert_eq!(untyped.groups, result.groups);
        assert_eq!(untyped.settings["interval_ns"], 1_000_000);
        assert_eq!(untyped.settings["cpus"], "1");
    }

    #[test]
    fn schema_field_names_are_stable() {
        let v: serde_json::Value = serde_json::from_str(&sample_result().to_json()).unwrap();
        for key in [
            "schema_version",
            "bench",
            "command_line",
            "environment",
            "calibration",
            "load",
            "settings",
            "groups",
            "merged",
        ] {
            assert!(v.get(key).is_some(), "missing top-level key {key}");
        }
        let s = &v["groups"][0]["metrics"][0]["summary"];
        for key in [
            "count", "min", "mean", "stddev", "p50", "p90", "p99", "p99_9", "p99_99", "p99_999",
            "max",
        ] {
            assert!(s.get(key).is_some(), "missing summary key {key}");
        }
        assert_eq!(
            v["schema_version"],
            <BenchResult as tame_host::Document>::SCHEMA.version
        );
    }

    #[test]
    fn a_spread_is_written_only_where_there_is_one() {
        let mut result = sample_result();
        let v: serde_json::Value = serde_json::from_str(&result.to_json()).unwrap();
        assert!(v["groups"][0].get("spread").is_none());
        result.groups[0].spread.insert(
            "latency p50".into(),
            Spread {
                min: 10.0,
                max: 12.0,
            },
        );
        let json = result.to_json();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["groups"][0]["spread"]["latency p50"]["max"], 12.0);
        let typed: BenchResult<CycleSettings> = serde_json::from_str(&json).unwrap();
        assert_eq!(typed, result);
        let mut spread = Spread::of(5.0);
        spread.include(3.0);
        assert_eq!(spread, Spread { min: 3.0, max: 5.0 });
        assert!(spread.overlaps(&Spread::of(5.0)) && !spread.overlaps(&Spread::of(5.5)));
    }
}
