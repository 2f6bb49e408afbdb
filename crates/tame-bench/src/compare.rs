//! `tame compare A.json B.json`: two results of the same bench side by side — per group
//! and metric (percentiles, counters, derived figures), and for noise results per CPU,
//! class and source — with the difference B − A and the ratio B / A.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;

use crate::error::{invalid, Result};
use crate::noise::NoiseFindings;
use crate::output::human_ns;
use crate::result::{BenchResult, GroupResult};
use crate::stats::Summary;

/// A result of any bench as `compare` reads it: the common part, and the noise findings
/// when the bench is `noise`.
#[derive(Clone, Debug, PartialEq)]
pub struct Compared {
    pub result: BenchResult,
    pub noise: Option<NoiseFindings>,
}

impl Compared {
    /// From JSON already parsed; an error means it is not a tame bench result.
    pub fn from_value(value: serde_json::Value) -> serde_json::Result<Self> {
        let noise = match value.get("noise") {
            Some(n) => serde_json::from_value(n.clone())?,
            None => None,
        };
        Ok(Self {
            result: serde_json::from_value(value)?,
            noise,
        })
    }
}

/// One figure in both results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The group (`cpu1`, `all`), or for a noise source the CPU and class (`cpu1 irq`).
    pub group: String,
    /// Metric and figure (`gap p99`), a counter or derived name, or source and figure.
    pub name: String,
    /// "ns" for times, "" for counts and percentages.
    pub unit: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    pub diff: Option<f64>,
    pub ratio: Option<f64>,
}

/// Two results compared, named as the user gave them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub bench: String,
    pub a: String,
    pub b: String,
    pub rows: Vec<Row>,
}

impl Comparison {
    /// Compare `a` (the baseline, named `a_name`) with `b`; refused unless both are
    /// results of the same bench.
    pub fn new(a_name: &str, a: &Compared, b_name: &str, b: &Compared) -> Result<Self> {
        if a.result.bench != b.result.bench {
            return Err(invalid(format!(
                "{a_name} is a `{}` result and {b_name} a `{}` result — compare two results of the same bench",
                a.result.bench, b.result.bench
            )));
        }
        Ok(Comparison {
            bench: a.result.bench.clone(),
            a: a_name.to_string(),
            b: b_name.to_string(),
            rows: compare(a, b),
        })
    }
}

fn row(group: &str, name: String, unit: &str, a: Option<f64>, b: Option<f64>) -> Row {
    let diff = a.zip(b).map(|(a, b)| b - a);
    let ratio = a.zip(b).and_then(|(a, b)| (a != 0.0).then(|| b / a));
    Row {
        group: group.to_string(),
        name,
        unit: unit.to_string(),
        a,
        b,
        diff,
        ratio,
    }
}

/// The summary figures compared, in row order.
const FIGURES: &[&str] = &["count", "mean", "p50", "p99", "p99_9", "p99_999", "max"];

fn figure(s: &Summary, name: &str) -> u64 {
    match name {
        "count" => s.count,
        "mean" => s.mean,
        "p50" => s.p50,
        "p99" => s.p99,
        "p99_9" => s.p99_9,
        "p99_999" => s.p99_999,
        "max" => s.max,
        _ => unreachable!("FIGURES names summary fields"),
    }
}

fn groups_by_label(r: &BenchResult) -> BTreeMap<&str, &GroupResult> {
    r.groups
        .iter()
        .chain(std::iter::once(&r.merged))
        .map(|g| (g.label.as_str(), g))
        .collect()
}

/// Every figure of two results of the same bench: groups present in both (by label), then
/// for noise results every source of either.
pub fn compare(a: &Compared, b: &Compared) -> Vec<Row> {
    let mut rows = Vec::new();
    let (ga, gb) = (groups_by_label(&a.result), groups_by_label(&b.result));
    for (label, x) in &ga {
        if let Some(y) = gb.get(label) {
            group_rows(label, x, y, &mut rows);
        }
    }
    rows.extend(noise_sources(a.noise.as_ref(), b.noise.as_ref()));
    rows
}

/// Metrics both groups have (figure by figure), then counters and derived figures of either.
fn group_rows(label: &str, x: &GroupResult, y: &GroupResult, rows: &mut Vec<Row>) {
    for m in &x.metrics {
        let Some(other) = y.metric(&m.name) else {
            continue;
        };
        for f in FIGURES {
            let unit = if *f == "count" { "" } else { m.unit.as_str() };
            rows.push(row(
                label,
                format!("{} {f}", m.name),
                unit,
                Some(figure(&m.summary, f) as f64),
                Some(figure(&other.summary, f) as f64),
            ));
        }
    }
    let keys: BTreeSet<&String> = x.counters.keys().chain(y.counters.keys()).collect();
    for k in keys {
        let unit = if k.ends_with("_ns") { "ns" } else { "" };
        rows.push(row(
            label,
            k.clone(),
            unit,
            x.counters.get(k).map(|v| *v as f64),
            y.counters.get(k).map(|v| *v as f64),
        ));
    }
    let keys: BTreeSet<&String> = x.derived.keys().chain(y.derived.keys()).collect();
    for k in keys {
        rows.push(row(
            label,
            k.clone(),
            "",
            x.derived.get(k).copied(),
            y.derived.get(k).copied(),
        ));
    }
}

/// A noise source: CPU, class name, source name.
type SourceKey<'a> = (u32, &'static str, &'a str);

/// Count, total ns and worst ns of every source, by CPU, class and source.
fn sources(noise: Option<&NoiseFindings>) -> BTreeMap<SourceKey<'_>, [f64; 3]> {
    let mut out = BTreeMap::new();
    for c in noise.into_iter().flat_map(|n| &n.cpus) {
        for s in &c.sources {
            let t = &s.tally;
            out.insert(
                (c.cpu, s.class.as_str(), s.source.as_str()),
                [t.count as f64, t.total_ns as f64, t.max_ns as f64],
            );
        }
    }
    out
}

/// Per-source rows for noise results: a source absent from one side counts as zero there.
fn noise_sources(a: Option<&NoiseFindings>, b: Option<&NoiseFindings>) -> Vec<Row> {
    let (sa, sb) = (sources(a), sources(b));
    let mut keys: Vec<&SourceKey> = sa.keys().chain(sb.keys()).collect();
    keys.sort();
    keys.dedup();
    // Biggest offenders (either side) first; ties stay in CPU, class, source order.
    let total = |k: &SourceKey| {
        sa.get(k)
            .map_or(0.0, |v| v[1])
            .max(sb.get(k).map_or(0.0, |v| v[1]))
    };
    keys.sort_by(|x, y| total(y).total_cmp(&total(x)));
    let mut rows = Vec::new();
    for k in keys {
        let group = format!("cpu{} {}", k.0, k.1);
        let va = sa.get(k).copied().unwrap_or([0.0; 3]);
        let vb = sb.get(k).copied().unwrap_or([0.0; 3]);
        for (i, (figure, unit)) in [("count", ""), ("total", "ns"), ("max", "ns")]
            .iter()
            .enumerate()
        {
            rows.push(row(
                &group,
                format!("{} {figure}", k.2),
                unit,
                Some(va[i]),
                Some(vb[i]),
            ));
        }
    }
    rows
}

fn fmt_value(v: Option<f64>, unit: &str) -> String {
    match v {
        None => "-".into(),
        Some(x) if unit == "ns" => {
            if x < 0.0 {
                format!("-{}", human_ns((-x).round() as u64))
            } else {
                human_ns(x.round() as u64)
            }
        }
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        Some(x) => format!("{x:.4}"),
    }
}

/// The human view: one line per figure, columns aligned.
pub fn table(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "tame compare ({}): A = {}, B = {}", c.bench, c.a, c.b);
    let mut lines = vec![[
        "group".to_string(),
        "figure".into(),
        "A".into(),
        "B".into(),
        "B − A".into(),
        "B / A".into(),
    ]];
    for r in &c.rows {
        lines.push([
            r.group.clone(),
            r.name.clone(),
            fmt_value(r.a, &r.unit),
            fmt_value(r.b, &r.unit),
            fmt_value(r.diff, &r.unit),
            r.ratio.map_or("-".into(), |x| format!("{x:.3}")),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for l in &lines {
        let cells: Vec<String> = l
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let pad = " ".repeat(widths[i] - s.chars().count());
                // Names left, numbers right.
                if i < 2 {
                    format!("{s}{pad}")
                } else {
                    format!("{pad}{s}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::{AttributionStatus, CpuNoise, LoopFigures};
    use crate::result::{Calibration, Metric};
    use tame_host::environment::RunEnvironment;
    use tame_trace::attribute::{NoiseClass, SourceTally, Tally};

    fn group(label: &str, p99: u64, gaps: u64) -> GroupResult {
        let summary = Summary {
            count: 10,
            min: 1,
            mean: 5,
            stddev: 1,
            p50: 4,
            p90: 8,
            p99,
            p99_9: p99,
            p99_99: p99,
            p99_999: p99,
            max: p99,
        };
        GroupResult {
            label: label.into(),
            cpu: Some(1),
            metrics: vec![Metric {
                name: "gap".into(),
                unit: "ns".into(),
                summary,
            }],
            counters: [("gaps".to_string(), gaps)].into_iter().collect(),
            derived: [("noise_share_percent".to_string(), 2.0)]
                .into_iter()
                .collect(),
        }
    }

    fn source(
        class: NoiseClass,
        name: &str,
        count: u64,
        total_ns: u64,
        max_ns: u64,
    ) -> SourceTally {
        SourceTally {
            class,
            source: name.into(),
            tally: Tally {
                count,
                total_ns,
                max_ns,
            },
        }
    }

    fn noise_result(p99: u64, gaps: u64, sources: Vec<SourceTally>) -> Compared {
        let cpu = group("cpu1", p99, gaps);
        let result = BenchResult {
            schema_version: 1,
            bench: "noise".into(),
            tool_version: "0".into(),
            command_line: Vec::new(),
            started_unix_ns: 0,
            elapsed_ns: 0,
            interrupted: false,
            environment: RunEnvironment::default(),
            calibration: Calibration::default(),
            load: None,
            partition: None,
            settings: serde_json::json!({}),
            groups: vec![cpu.clone()],
            merged: GroupResult {
                label: "all".into(),
                ..cpu
            },
        };
        let noise = NoiseFindings {
            threshold_ns: 1_000,
            attribution: AttributionStatus::default(),
            cpus: vec![CpuNoise {
                cpu: 1,
                run_ns: 0,
                noise_ns: 0,
                noise_share_percent: 0.0,
                available_percent: 100.0,
                gaps,
                gaps_dropped: 0,
                without_capture: LoopFigures::default(),
                with_capture: LoopFigures::default(),
                attributed_ns: None,
                unexplained_ns: None,
                events: 0,
                events_lost: 0,
                classes: Vec::new(),
                sources,
            }],
        };
        Compared {
            result,
            noise: Some(noise),
        }
    }

    #[test]
    fn differences_and_ratios_per_metric_and_per_source() {
        let a = noise_result(
            100,
            10,
            vec![source(NoiseClass::Irq, "irq 36 virtio", 4, 400, 150)],
        );
        let b = noise_result(
            300,
            5,
            vec![source(NoiseClass::Tick, "local_timer", 2, 20, 10)],
        );
        let c = Comparison::new("a", &a, "b", &b).unwrap();
        let find = |g: &str, n: &str| c.rows.iter().find(|r| r.group == g && r.name == n).unwrap();
        let p99 = find("cpu1", "gap p99");
        assert_eq!((p99.diff, p99.ratio), (Some(200.0), Some(3.0)));
        assert_eq!(p99.unit, "ns");
        assert_eq!(find("cpu1", "gap count").unit, "");
        let gaps = find("all", "gaps");
        assert_eq!((gaps.diff, gaps.ratio), (Some(-5.0), Some(0.5)));
        // The IRQ is gone in B: counted as zero there, and listed first (the larger total).
        let irq = find("cpu1 irq", "irq 36 virtio total");
        assert_eq!(
            (irq.a, irq.b, irq.ratio),
            (Some(400.0), Some(0.0), Some(0.0))
        );
        let tick = find("cpu1 tick", "local_timer count");
        assert_eq!((tick.a, tick.b, tick.ratio), (Some(0.0), Some(2.0), None));
        let first_source = c
            .rows
            .iter()
            .position(|r| r.group.starts_with("cpu1 "))
            .unwrap();
        assert_eq!(c.rows[first_source].group, "cpu1 irq");
        assert!(table(&c).contains("gap p99"));
    }

    #[test]
    fn results_of_different_benches_are_refused() {
        let a = noise_result(100, 10, Vec::new());
        let mut b = a.clone();
        b.result.bench = "cycle".into();
        let e = Comparison::new("a.json", &a, "b.json", &b).unwrap_err();
        assert!(e.is_bad_input());
        assert!(
            e.to_string()
                .contains("a.json is a `noise` result and b.json a `cycle` result"),
            "{e}"
        );
    }

    /// Results written by `tame bench` and the table and JSON `tame compare` printed for
    /// them before the comparison moved here (the noise sources were added by hand, with
    /// equal totals in several classes so the order of ties is checked too).
    #[test]
    fn output_is_what_tame_compare_printed_before() {
        let load = |text: &str| Compared::from_value(serde_json::from_str(text).unwrap()).unwrap();
        let cases = [
            (
                "a-noise.json",
                include_str!("../testdata/compare/a-noise.json"),
                "b-noise.json",
                include_str!("../testdata/compare/b-noise.json"),
                include_str!("../testdata/compare/noise.table"),
                include_str!("../testdata/compare/noise.json"),
            ),
            (
                "a-sleep.json",
                include_str!("../testdata/compare/a-sleep.json"),
                "b-sleep.json",
                include_str!("../testdata/compare/b-sleep.json"),
                include_str!("../testdata/compare/sleep.table"),
                include_str!("../testdata/compare/sleep.json"),
            ),
        ];
        for (a_name, a, b_name, b, want_table, want_json) in cases {
            let c = Comparison::new(a_name, &load(a), b_name, &load(b)).unwrap();
            assert_eq!(table(&c), want_table, "{a_name}");
            assert_eq!(
                serde_json::to_string_pretty(&c).unwrap() + "\n",
                want_json,
                "{a_name}"
            );
        }
    }
}
