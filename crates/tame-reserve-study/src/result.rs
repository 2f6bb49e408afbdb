//! The study as a result of the common schema (`tame bench reserve --json`, bench
//! `reserve`): a group per stability series (the client's share per window: distribution
//! and time line), per backend's overhead points and per periodic-client configuration
//! (frame distances), G and the floor in `merged`; the study's tables as they were
//! (`reserve`, the bench's own top-level object, as `noise` is for noise results).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tame_bench::distribution::Distribution;
use tame_bench::timeline::TimelineRecorder;
use tame_bench::{BenchResult, GroupResult, Metric, Recorder};

use crate::{Options, Report, StabilityRow};
use tame_reserve::spec::Backend;

/// What the study was asked to do (`settings` of a reserve result).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReserveSettings {
    pub cpu: u32,
    pub backends: Vec<Backend>,
    pub quick: bool,
    pub shares_ppm: Vec<u64>,
    pub period_ns: u64,
    pub overhead_window_ns: u64,
    pub stability_share_ppm: u64,
    pub stability_window_ns: u64,
    pub unloaded_windows: usize,
    pub windows_per_step: usize,
    pub max_load: usize,
    pub frame_ns: u64,
    pub frame_cpu_ns: u64,
    pub frames: usize,
}

impl ReserveSettings {
    pub fn of(o: &Options, quick: bool) -> Self {
        ReserveSettings {
            cpu: o.cpu,
            backends: o.backends.clone(),
            quick,
            shares_ppm: o.shares_ppm.clone(),
            period_ns: o.period_ns,
            overhead_window_ns: o.overhead_window_ns,
            stability_share_ppm: o.stability_share_ppm,
            stability_window_ns: o.stability_window_ns,
            unloaded_windows: o.unloaded_windows,
            windows_per_step: o.windows_per_step,
            max_load: o.max_load,
            frame_ns: o.frame_ns,
            frame_cpu_ns: o.frame_cpu_ns,
            frames: o.frames,
        }
    }
}

/// A reserve result: the common schema, and the study's tables beside it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReserveResult {
    #[serde(flatten)]
    pub result: BenchResult<ReserveSettings>,
    pub reserve: Report,
}

impl ReserveResult {
    pub fn to_json(&self) -> String {
        tame_bench::json::pretty(self).expect("results serialise: all keys are strings")
    }
}

/// The name of a share figure: `o_i 20%`.
pub fn share_key(figure: &str, share_ppm: u64) -> String {
    format!(
        "{figure} {}",
        tame_reserve::spec::percent(share_ppm).replace(' ', "")
    )
}

/// The groups of the study's tables: stability series, overhead points per backend,
/// periodic-client configurations; and `merged` (label `all`) with G and the floor.
pub fn groups(report: &Report) -> (Vec<GroupResult>, GroupResult) {
    let mut groups: Vec<GroupResult> = report
        .stability
        .iter()
        .map(|row| stability_group(report, row))
        .collect();
    let mut backends: Vec<Backend> = report.overhead.iter().map(|r| r.backend).collect();
    backends.dedup();
    for b in backends {
        let mut derived = BTreeMap::new();
        for r in report.overhead.iter().filter(|r| r.backend == b) {
            for (figure, value) in [
                ("o_i", r.o_i),
                ("o_e", r.o_e),
                ("o_e_shared", r.o_e_shared),
                ("client_cpu", r.client_cpu),
                ("rest_cpu", r.rest_cpu),
            ] {
                derived.insert(share_key(figure, r.share_ppm), value);
            }
        }
        groups.push(GroupResult {
            label: format!("{b}/overhead"),
            cpu: pinned_cpu(report, b),
            derived,
            ..GroupResult::default()
        });
    }
    for row in &report.periodic {
        let mut r = Recorder::new();
        row.distances_ns.iter().for_each(|&d| r.record(d));
        let metrics = if r.count() > 0 {
            vec![metric("frame_distance", "ns", &r)]
        } else {
            Vec::new()
        };
        groups.push(GroupResult {
            label: format!("periodic {}, {} background", row.config, row.background),
            cpu: Some(report.cpu),
            metrics,
            counters: [("frames".to_string(), row.frames as u64)].into(),
            ..GroupResult::default()
        });
    }
    let merged = GroupResult {
        label: "all".into(),
        cpu: Some(report.cpu),
        counters: [("floor_windows".to_string(), report.floor_windows as u64)].into(),
        derived: [
            ("g_before".to_string(), report.g_before),
            ("g_after".to_string(), report.g_after),
            ("shared_rate_before".to_string(), report.shared_rate_before),
            ("floor_cv".to_string(), report.floor_cv),
        ]
        .into(),
        ..GroupResult::default()
    };
    (groups, merged)
}

/// The CPU a backend's client was pinned to (the deadline backend cannot pin).
fn pinned_cpu(report: &Report, backend: Backend) -> Option<u32> {
    (backend != Backend::Deadline).then_some(report.cpu)
}

fn metric(name: &str, unit: &str, r: &Recorder) -> Metric {
    Metric {
        name: name.into(),
        unit: unit.into(),
        summary: r.summary(),
        distribution: Some(Distribution::of(r)),
    }
}

/// The client's share of G per window, in ppm (`client_share`), with its time line: one
/// window after the other, each `stability_window_ns` long.
fn stability_group(report: &Report, row: &StabilityRow) -> GroupResult {
    let window = report.stability_window_ns.max(1);
    let n = row.window_rates.len() as u64;
    let mut r = Recorder::new();
    let mut timeline = TimelineRecorder::new(0, n * window);
    for (i, &rate) in row.window_rates.iter().enumerate() {
        let share = share_ppm(rate, report.g_before);
        r.record(share);
        timeline.record(i as u64 * window + window / 2, share);
    }
    let mut derived = BTreeMap::from([
        ("cv".to_string(), row.cv),
        (
            "mean_share".to_string(),
            row.mean_rate / report.g_before.max(f64::MIN_POSITIVE),
        ),
    ]);
    for (step, share) in row.step_cpu.iter().enumerate() {
        derived.insert(format!("share_at_load_{step:02}"), *share);
    }
    let has_windows = r.count() > 0;
    GroupResult {
        label: format!("{}/{}", row.backend, row.load),
        cpu: pinned_cpu(report, row.backend),
        metrics: if has_windows {
            vec![metric("client_share", "ppm", &r)]
        } else {
            Vec::new()
        },
        counters: [("windows".to_string(), row.windows as u64)].into(),
        derived,
        spread: BTreeMap::new(),
        timeline: has_windows.then(|| timeline.timeline("client_share", "ppm")),
        not_measured: None,
    }
}

/// A rate as a share of G in ppm (0 when G is unknown).
pub fn share_ppm(rate: f64, g: f64) -> u64 {
    if g > 0.0 && rate.is_finite() && rate > 0.0 {
        (rate / g * 1e6).round() as u64
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FrameRow, OverheadRow};

    fn report() -> Report {
        let text = include_str!("../tests/fixtures/reserve-report.json");
        serde_json::from_str(text).expect("the recorded study reads")
    }

    #[test]
    fn a_recorded_study_becomes_groups_with_its_figures() {
        let mut r = report();
        r.stability[0].window_rates = vec![r.g_before * 0.5, r.g_before * 0.25];
        r.periodic[0].distances_ns = vec![100_000_000, 120_000_000, 80_000_000];
        let (groups, merged) = groups(&r);
        let s = &groups[0];
        assert_eq!(
            s.label,
            format!("{}/{}", r.stability[0].backend, r.stability[0].load)
        );
        let m = s.metric("client_share").expect("a share per window");
        assert_eq!((m.unit.as_str(), m.summary.count), ("ppm", 2));
        assert_eq!((m.summary.min, m.summary.max), (250_000, 500_000));
        let t = s.timeline.as_ref().expect("a time line of the windows");
        assert_eq!(t.windows.iter().map(|w| w.count).sum::<u64>(), 2);
        assert_eq!(s.derived["cv"], r.stability[0].cv);
        // Series recorded before windows were kept have figures but no distribution.
        assert!(groups[1].metrics.is_empty() && groups[1].timeline.is_none());
        let o: &OverheadRow = &r.overhead[0];
        let g = groups
            .iter()
            .find(|g| g.label == format!("{}/overhead", o.backend))
            .expect("an overhead group per backend");
        assert_eq!(g.derived[&share_key("o_i", o.share_ppm)], o.o_i);
        assert_eq!(g.derived[&share_key("o_e", o.share_ppm)], o.o_e);
        let f: &FrameRow = &r.periodic[0];
        let p = groups
            .iter()
            .find(|g| g.label == format!("periodic {}, {} background", f.config, f.background))
            .expect("a group per periodic configuration");
        let d = p.metric("frame_distance").unwrap();
        assert_eq!(
            (d.summary.min, d.summary.max, d.summary.mean),
            (80_000_000, 120_000_000, 100_000_000)
        );
        assert_eq!(merged.derived["g_before"], r.g_before);
        assert_eq!(merged.derived["floor_cv"], r.floor_cv);
    }

    #[test]
    fn shares_are_ppm_of_g_and_zero_when_unknown() {
        assert_eq!(share_ppm(500.0, 1000.0), 500_000);
        assert_eq!(share_ppm(1.0, 3.0), 333_333);
        assert_eq!(share_ppm(5.0, 0.0), 0);
        assert_eq!(share_ppm(f64::NAN, 1.0), 0);
        assert_eq!(share_key("o_i", 200_000), "o_i 20%");
    }
}
