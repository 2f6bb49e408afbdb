//! `tame compare A.json B.json`: two results of the same bench side by side — per group
//! and metric (percentiles, counters, derived figures), and for noise results per CPU,
//! class and source — with the difference B − A, the ratio B / A, and whether the
//! difference exceeds the spread the results carry (an ipc result's rounds, the threads
//! of `all`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

pub mod gate;

/// The tag of a comparison's schema (`tame.compare/1`), for readers that compare strings.
/// Comparisons written before it have no `schema`.
pub const COMPARE_SCHEMA: &str = <Comparison as tame_host::Document>::SCHEMA.tag;

/// Version of a comparison as JSON, its `schema` (docs/results.md, at its end).
impl tame_host::Document for Comparison {
    const SCHEMA: tame_host::Schema = tame_host::schema!(Tagged "tame.compare", 1);
}

use serde::Serialize;

use crate::error::{invalid, Result};
use crate::noise::NoiseFindings;
use crate::result::{BenchResult, GroupResult, Spread};
use crate::stats::Summary;
use crate::watch::WatchFindings;
use tame_rt::duration::{format_ns_as, NsStyle};

/// A result of any bench as `compare` reads it: the common part, and the findings beside
/// it where the bench writes them (`noise`, `watch`), so that the report can draw them.
#[derive(Clone, Debug, PartialEq)]
pub struct Compared {
    pub result: BenchResult,
    pub noise: Option<NoiseFindings>,
    pub watch: Option<WatchFindings>,
}

impl Compared {
    /// From JSON already parsed; an error means it is not a tame bench result.
    pub fn from_value(value: serde_json::Value) -> serde_json::Result<Self> {
        let beside = |key: &str| value.get(key).cloned().unwrap_or_default();
        let noise = serde_json::from_value(beside("noise"))?;
        let watch = serde_json::from_value(beside("watch"))?;
        Ok(Self {
            result: serde_json::from_value(value)?,
            noise,
            watch,
        })
    }
}

/// One figure in both results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The group (`cpu1`, `all`), or for a noise source the CPU and class (`cpu1 irq`).
    pub group: String,
    /// Metric and figure (`gap p99`), a counter or derived name, or source and figure;
    /// [`ONLY_IN_A`] / [`ONLY_IN_B`] for a group (or `metric: only in A`) one result lacks.
    pub name: String,
    /// "ns" for times, "" for counts and percentages.
    pub unit: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    pub diff: Option<f64>,
    pub ratio: Option<f64>,
    /// How much the figure varied inside A and inside B (over an ipc result's rounds; for
    /// `all`, over the result's threads), where the result says.
    pub spread_a: Option<Spread>,
    pub spread_b: Option<Spread>,
    /// Whether B − A exceeds that spread: the two ranges do not overlap. `None` when the
    /// spread is not known for both.
    pub beyond_spread: Option<bool>,
    /// A percentile one side's sample count cannot support: the samples it needs. That
    /// side's value is left out (`a` or `b` is null), and with it the difference and ratio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs_samples: Option<u64>,
}

/// The row name of a group only the first result has.
pub const ONLY_IN_A: &str = "only in A";
/// The row name of a group only the second result has.
pub const ONLY_IN_B: &str = "only in B";

/// Two results compared, named as the user gave them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub bench: String,
    pub a: String,
    pub b: String,
    pub rows: Vec<Row>,
    /// What the reader should know about the rows: a group left out, how to read the spread.
    pub notes: Vec<String>,
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
        let (rows, notes) = compare(a, b);
        Ok(Comparison {
            bench: a.result.bench.clone(),
            a: a_name.to_string(),
            b: b_name.to_string(),
            rows,
            notes,
        })
    }
}

/// One step of a sweep as compare reads it: its name (`tasks=4`) and its result.
pub type Step = (String, Compared);

fn step_names(steps: &[Step]) -> Vec<&str> {
    steps.iter().map(|(n, _)| n.as_str()).collect()
}

impl Comparison {
    /// Two sweeps step by step: each step both ran is compared as two results are, its
    /// rows' groups prefixed by the step (`tasks=4 all`); a step only one ran is named in the
    /// notes. Refused when the sweeps share no step (or their steps' benches differ).
    pub fn of_sweeps(a_name: &str, a: &[Step], b_name: &str, b: &[Step]) -> Result<Self> {
        let common: Vec<(&Step, &Step)> = a
            .iter()
            .filter_map(|x| b.iter().find(|y| y.0 == x.0).map(|y| (x, y)))
            .collect();
        let Some(((_, first_a), _)) = common.first() else {
            return Err(invalid(format!(
                "the sweeps {a_name} ({}) and {b_name} ({}) share no step — compare two sweeps over the same values",
                step_names(a).join(", "),
                step_names(b).join(", ")
            )));
        };
        let mut rows = Vec::new();
        // Each note once, with the steps it holds for (none named when it holds for all).
        let mut notes: Vec<(String, Vec<&str>)> = Vec::new();
        for ((step, x), (_, y)) in &common {
            let c = Comparison::new(
                &format!("{a_name} [{step}]"),
                x,
                &format!("{b_name} [{step}]"),
                y,
            )?;
            rows.extend(c.rows.into_iter().map(|r| Row {
                group: format!("{step} {}", r.group),
                ..r
            }));
            for note in c.notes {
                match notes.iter_mut().find(|(n, _)| *n == note) {
                    Some((_, steps)) => steps.push(step),
                    None => notes.push((note, vec![step])),
                }
            }
        }
        let mut notes: Vec<String> = notes
            .into_iter()
            .map(|(note, steps)| {
                if steps.len() == common.len() {
                    note
                } else {
                    format!("{}: {note}", steps.join(", "))
                }
            })
            .collect();
        for (side, steps, other) in [("A", a, b), ("B", b, a)] {
            let alone: Vec<&str> = step_names(steps)
                .into_iter()
                .filter(|n| !other.iter().any(|(o, _)| o == n))
                .collect();
            if !alone.is_empty() {
                notes.push(format!(
                    "steps only in {side}, not compared: {}",
                    alone.join(", ")
                ));
            }
        }
        Ok(Comparison {
            bench: first_a.result.bench.clone(),
            a: a_name.to_string(),
            b: b_name.to_string(),
            rows,
            notes,
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
        spread_a: None,
        spread_b: None,
        beyond_spread: None,
        needs_samples: None,
    }
}

impl Row {
    fn with_spread(mut self, a: Option<Spread>, b: Option<Spread>) -> Row {
        self.spread_a = a;
        self.spread_b = b;
        self.beyond_spread = a.zip(b).map(|(a, b)| !a.overlaps(&b));
        self
    }
}

/// The summary figures compared, in row order.
const FIGURES: &[&str] = &["count", "mean", "p50", "p99", "p99_9", "p99_999", "max"];

/// Whether the summary's count supports the figure (only percentiles can lack support).
pub(crate) fn supported(s: &Summary, name: &str) -> bool {
    crate::stats::quantile_of_field(name).is_none_or(|q| s.supports(q))
}

pub(crate) fn figure(s: &Summary, name: &str) -> u64 {
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

/// A group as compared: its unique label, and whether it is the result's merged group.
pub(crate) struct Labelled<'a> {
    pub(crate) label: String,
    pub(crate) group: &'a GroupResult,
    pub(crate) merged: bool,
}

/// The groups of a result (the merged one last) under unique labels: a label already
/// taken gets ` #2`, ` #3`, … so that no two groups share rows.
pub(crate) fn labelled(r: &BenchResult) -> Vec<Labelled<'_>> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let all = r.groups.iter().map(|g| (g, false));
    all.chain(std::iter::once((&r.merged, true)))
        .map(|(group, merged)| {
            let n = seen.entry(group.label.as_str()).or_insert(0);
            *n += 1;
            let label = if *n == 1 {
                group.label.clone()
            } else {
                format!("{} #{n}", group.label)
            };
            Labelled {
                label,
                group,
                merged,
            }
        })
        .collect()
}

/// The label of a result's only group when its merged group repeats it figure for figure
/// (a run on one CPU).
pub(crate) fn merged_repeats_only_group(r: &BenchResult) -> Option<&str> {
    let [only] = r.groups.as_slice() else {
        return None;
    };
    let m = &r.merged;
    (m.metrics == only.metrics
        && m.counters == only.counters
        && m.derived == only.derived
        && m.spread == only.spread)
        .then_some(only.label.as_str())
}

/// Every figure of two results of the same bench, and notes on reading them: groups of
/// either (by label; one only in A or B gets one row saying so), then for noise results
/// every source of either. The merged group is left out where both results have one
/// group, the same, that it repeats.
pub fn compare(a: &Compared, b: &Compared) -> (Vec<Row>, Vec<String>) {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let (mut la, mut lb) = (labelled(&a.result), labelled(&b.result));
    if let (Some(x), Some(y)) = (
        merged_repeats_only_group(&a.result),
        merged_repeats_only_group(&b.result),
    ) {
        if x == y {
            notes.push(format!(
                "`{}` is not shown: in both results it repeats their one group, {x}",
                a.result.merged.label
            ));
            la.retain(|g| !g.merged);
            lb.retain(|g| !g.merged);
        }
    }
    let ga: BTreeMap<&str, &Labelled> = la.iter().map(|g| (g.label.as_str(), g)).collect();
    let gb: BTreeMap<&str, &Labelled> = lb.iter().map(|g| (g.label.as_str(), g)).collect();
    let labels: BTreeSet<&str> = ga.keys().chain(gb.keys()).copied().collect();
    let mut unmeasured = [Vec::new(), Vec::new()];
    for label in labels {
        let (x, y) = (ga.get(label), gb.get(label));
        // A group a run never reached has no figures: compared, it would read as zeros.
        let skipped = [x, y].map(|g| g.is_some_and(|g| g.group.not_measured.is_some()));
        if skipped.contains(&true) {
            for (list, _) in unmeasured.iter_mut().zip(skipped).filter(|(_, s)| *s) {
                list.push(label);
            }
            continue;
        }
        match (x, y) {
            (Some(x), Some(y)) => {
                let x = Side::of(&a.result, x);
                let y = Side::of(&b.result, y);
                group_rows(label, &x, &y, &mut rows);
            }
            (Some(_), None) => rows.push(row(label, ONLY_IN_A.into(), "", None, None)),
            (None, _) => rows.push(row(label, ONLY_IN_B.into(), "", None, None)),
        }
    }
    notes.extend(unmeasured_notes(&unmeasured));
    rows.extend(noise_sources(a.noise.as_ref(), b.noise.as_ref()));
    notes.push(if rows.iter().any(|r| r.beyond_spread.is_some()) {
        "spread: `beyond` — the figure's ranges in A and B (over an ipc result's rounds; for `all`, over the threads) do not overlap; `within` — they do; blank — no spread is known for that figure".to_string()
    } else {
        "no run-to-run spread is known for these results (an ipc result of two or more --rounds carries one, `all` of several threads another): a difference may be noise".to_string()
    });
    (rows, notes)
}

/// What was left out because a run never measured it (A's list, then B's).
fn unmeasured_notes(unmeasured: &[Vec<&str>; 2]) -> Vec<String> {
    ["A", "B"]
        .iter()
        .zip(unmeasured)
        .filter(|(_, labels)| !labels.is_empty())
        .map(|(side, labels)| {
            format!(
                "not measured in {side} (its run was stopped before it reached them), so not compared: {}",
                labels.join(", ")
            )
        })
        .collect()
}

/// One result's group, with what it takes to know a figure's spread.
pub(crate) struct Side<'a> {
    group: &'a GroupResult,
    /// The threads' groups when this is the merged group `all` of several threads.
    threads: Option<&'a [GroupResult]>,
}

impl<'a> Side<'a> {
    pub(crate) fn of(result: &'a BenchResult, g: &Labelled<'a>) -> Self {
        let threads = (g.merged && g.group.label == "all" && result.groups.len() >= 2)
            .then_some(result.groups.as_slice());
        Side {
            group: g.group,
            threads,
        }
    }

    /// The spread of a metric's figure: recorded in the group (rounds), else over the
    /// threads for `all` (not for `count`, which adds up rather than varies).
    pub(crate) fn figure_spread(&self, metric: &str, f: &str) -> Option<Spread> {
        if let Some(s) = self.group.spread.get(&format!("{metric} {f}")) {
            return Some(*s);
        }
        if f == "count" {
            return None;
        }
        let mut values = self
            .threads?
            .iter()
            .filter_map(|g| g.metric(metric))
            .map(|m| figure(&m.summary, f) as f64);
        let mut spread = Spread::of(values.next()?);
        let mut n = 1;
        for v in values {
            spread.include(v);
            n += 1;
        }
        (n >= 2).then_some(spread)
    }
}

/// Metrics of either group (figure by figure), then counters and derived figures of either;
/// a name that is both a counter and a derived figure is told apart.
fn group_rows(label: &str, x: &Side, y: &Side, rows: &mut Vec<Row>) {
    // Metrics of either, in the order the results list them, each once.
    let mut done = BTreeSet::new();
    for m in x.group.metrics.iter().chain(&y.group.metrics) {
        if !done.insert(m.name.as_str()) {
            continue;
        }
        let (ma, mb) = (x.group.metric(&m.name), y.group.metric(&m.name));
        let (Some(ma), Some(mb)) = (ma, mb) else {
            let only = if ma.is_some() { ONLY_IN_A } else { ONLY_IN_B };
            rows.push(row(label, format!("{}: {only}", m.name), "", None, None));
            continue;
        };
        for f in FIGURES {
            let unit = if *f == "count" { "" } else { m.unit.as_str() };
            let value = |s: &Summary| supported(s, f).then(|| figure(s, f) as f64);
            let (va, vb) = (value(&ma.summary), value(&mb.summary));
            let mut r = row(label, format!("{} {f}", m.name), unit, va, vb);
            if va.is_some() && vb.is_some() {
                r = r.with_spread(x.figure_spread(&m.name, f), y.figure_spread(&m.name, f));
            } else {
                r.needs_samples =
                    crate::stats::quantile_of_field(f).map(crate::stats::samples_needed);
            }
            rows.push(r);
        }
    }
    let (xc, yc, xd, yd) = (
        &x.group.counters,
        &y.group.counters,
        &x.group.derived,
        &y.group.derived,
    );
    let counters: BTreeSet<&String> = xc.keys().chain(yc.keys()).collect();
    let derived: BTreeSet<&String> = xd.keys().chain(yd.keys()).collect();
    for k in &counters {
        let unit = if k.ends_with("_ns") { "ns" } else { "" };
        let name = if derived.contains(k) {
            format!("{k} (counter)")
        } else {
            k.to_string()
        };
        rows.push(
            row(
                label,
                name,
                unit,
                xc.get(*k).map(|v| *v as f64),
                yc.get(*k).map(|v| *v as f64),
            )
            .with_spread(
                x.group.spread.get(*k).copied(),
                y.group.spread.get(*k).copied(),
            ),
        );
    }
    for k in &derived {
        let name = if counters.contains(k) {
            format!("{k} (derived)")
        } else {
            k.to_string()
        };
        rows.push(
            row(label, name, "", xd.get(*k).copied(), yd.get(*k).copied()).with_spread(
                x.group.spread.get(*k).copied(),
                y.group.spread.get(*k).copied(),
            ),
        );
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

/// One side's figure, or why a percentile is not shown.
fn side_value(v: Option<f64>, r: &Row) -> String {
    match (v, r.needs_samples) {
        (None, Some(n)) => crate::stats::needs_text(n),
        _ => fmt_value(v, &r.unit),
    }
}

pub(crate) fn fmt_value(v: Option<f64>, unit: &str) -> String {
    match v {
        None => "-".into(),
        Some(x) if unit == "ns" => {
            if x < 0.0 {
                format!("-{}", format_ns_as((-x).round() as u64, NsStyle::Fixed))
            } else {
                format_ns_as(x.round() as u64, NsStyle::Fixed)
            }
        }
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        Some(x) => format!("{x:.4}"),
    }
}

/// The human view: one line per figure, columns aligned (a spread column where any
/// figure's spread is known), then the notes.
pub fn table(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "tame compare ({}): A = {}, B = {}", c.bench, c.a, c.b);
    let with_spread = c.rows.iter().any(|r| r.beyond_spread.is_some());
    let mut header = vec![
        "group".to_string(),
        "figure".into(),
        "A".into(),
        "B".into(),
        "B − A".into(),
        "B / A".into(),
    ];
    if with_spread {
        header.push("spread".into());
    }
    let mut lines = vec![header];
    for r in &c.rows {
        let mut line = vec![
            r.group.clone(),
            r.name.clone(),
            side_value(r.a, r),
            side_value(r.b, r),
            fmt_value(r.diff, &r.unit),
            r.ratio.map_or("-".into(), |x| format!("{x:.3}")),
        ];
        if with_spread {
            line.push(match r.beyond_spread {
                Some(true) => "beyond".into(),
                Some(false) => "within".into(),
                None => String::new(),
            });
        }
        lines.push(line);
    }
    out.push_str(&aligned(&lines, &[0, 1, 6]));
    for note in &c.notes {
        let _ = writeln!(out, "{note}");
    }
    out
}

/// Rows of cells as lines with aligned columns, two spaces apart: the columns in `left`
/// (names, verdicts) padded on the right, the others (numbers) on the left.
pub(crate) fn aligned(lines: &[Vec<String>], left: &[usize]) -> String {
    let columns = lines.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for l in lines {
        let cells: Vec<String> = l
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let pad = " ".repeat(widths[i] - s.chars().count());
                if left.contains(&i) {
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
            count: 1_000_000,
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
                distribution: None,
            }],
            counters: [("gaps".to_string(), gaps)].into_iter().collect(),
            derived: [("noise_share_percent".to_string(), 2.0)]
                .into_iter()
                .collect(),
            spread: BTreeMap::new(),
            timeline: None,
            not_measured: None,
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
            watch: None,
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
        let gaps = find("cpu1", "gaps");
        assert_eq!((gaps.diff, gaps.ratio), (Some(-5.0), Some(0.5)));
        // `all` repeats cpu1 in both: not shown, and said so.
        assert!(c.rows.iter().all(|r| r.group != "all"));
        assert_eq!(
            c.notes[0],
            "`all` is not shown: in both results it repeats their one group, cpu1"
        );
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

    /// Two watch results (tame-report's fixtures, written from the watch's types): read
    /// with their findings, compared thread by thread through the common groups.
    #[test]
    fn watch_results_compare_thread_by_thread() {
        let load = |text: &str| Compared::from_value(serde_json::from_str(text).unwrap()).unwrap();
        let a = load(include_str!("../../tame-report/tests/fixtures/watch.json"));
        let b = load(include_str!(
            "../../tame-report/tests/fixtures/watch-partitioned.json"
        ));
        let w = a.watch.as_ref().expect("the findings beside the result");
        assert_eq!(w.threads.len(), a.result.groups.len());
        assert!(!w.snapshots.is_empty());
        let c = Comparison::new("watch.json", &a, "watch-partitioned.json", &b).unwrap();
        unique(&c.rows);
        let find = |g: &str, n: &str| {
            c.rows
                .iter()
                .find(|r| r.group == g && r.name == n)
                .unwrap_or_else(|| panic!("{g} / {n}"))
        };
        for (i, g) in a.result.groups.iter().enumerate() {
            for (m, metric) in ["wake_latency", "response", "run_time"].iter().enumerate() {
                let p50 = find(&g.label, &format!("{metric} p50"));
                let want = |r: &Compared| r.result.groups[i].metrics[m].summary.p50 as f64;
                assert_eq!((p50.a, p50.b), (Some(want(&a)), Some(want(&b))));
                assert_eq!(p50.unit, "ns");
            }
        }
        let misses = find("loop", "misses");
        assert_eq!((misses.a, misses.b), (Some(20.0), Some(1.0)));
        assert_eq!(find("logger", "period_ns").a, Some(10_000_000.0));
        // `all` merges two threads: kept, its percentiles spread over them.
        assert!(find("all", "response p50").beyond_spread.is_some());
        assert!(table(&c)
            .lines()
            .any(|l| l.starts_with("loop ") && l.contains("wake_latency p99")));
    }

    /// A result of `bench` with `groups` and the merged group `merged`.
    fn result_of(bench: &str, groups: Vec<GroupResult>, merged: GroupResult) -> Compared {
        let base = noise_result(1, 1, Vec::new()).result;
        Compared {
            result: BenchResult {
                bench: bench.into(),
                groups,
                merged,
                ..base
            },
            noise: None,
            watch: None,
        }
    }

    /// An ipc group: `p50` one-way, spread over the rounds `[lo, hi]` if given.
    fn ipc_group(label: &str, p50: u64, rounds: Option<(f64, f64)>) -> GroupResult {
        let mut g = group(label, p50, 1);
        g.metrics[0].name = "one_way_latency".into();
        g.metrics[0].summary.p50 = p50;
        g.counters = [("round_trips".to_string(), 10)].into_iter().collect();
        g.derived = BTreeMap::new();
        if let Some((min, max)) = rounds {
            g.spread
                .insert("one_way_latency p50".into(), Spread { min, max });
        }
        g
    }

    fn unique(rows: &[Row]) {
        let mut seen = BTreeSet::new();
        for r in rows {
            assert!(
                seen.insert((r.group.as_str(), r.name.as_str())),
                "row {} / {} twice",
                r.group,
                r.name
            );
        }
    }

    #[test]
    fn groups_in_one_result_only_are_shown_as_such() {
        let ratios = |name: &str, v: f64| GroupResult {
            label: "ratios".into(),
            derived: [(name.to_string(), v)].into_iter().collect(),
            ..GroupResult::default()
        };
        let a = result_of(
            "ipc",
            vec![
                ipc_group("floor/8B", 40, None),
                ipc_group("pipe/8B", 14_000, None),
            ],
            ratios("speedup_tame-ring_8B_vs_pipe", 250.0),
        );
        let b = result_of(
            "ipc",
            vec![ipc_group("floor/64B", 45, None)],
            ratios("speedup_tame-ring_64B_vs_pipe", 140.0),
        );
        let c = Comparison::new("a", &a, "b", &b).unwrap();
        let names: Vec<(&str, &str)> = c
            .rows
            .iter()
            .filter(|r| r.name.starts_with("only in"))
            .map(|r| (r.group.as_str(), r.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("floor/64B", ONLY_IN_B),
                ("floor/8B", ONLY_IN_A),
                ("pipe/8B", ONLY_IN_A)
            ]
        );
        // The ratios group is in both: each ratio of either, the other side empty.
        let ratio = |n: &str| {
            c.rows
                .iter()
                .find(|r| r.group == "ratios" && r.name == n)
                .unwrap()
        };
        assert_eq!(ratio("speedup_tame-ring_8B_vs_pipe").b, None);
        assert_eq!(ratio("speedup_tame-ring_64B_vs_pipe").a, None);
        let text = table(&c);
        assert!(text.contains("floor/64B  only in B"), "{text}");
        unique(&c.rows);
    }

    #[test]
    fn no_row_appears_twice_under_one_name() {
        // A schema-1 ipc result: each goal both a verdict (counter) and a ratio (derived),
        // and a group whose label is the merged group's.
        let goals = GroupResult {
            label: "goals".into(),
            counters: [("latency_tame-ring_8B_over_floor".to_string(), 1)]
                .into_iter()
                .collect(),
            derived: [("latency_tame-ring_8B_over_floor".to_string(), 1.38)]
                .into_iter()
                .collect(),
            ..GroupResult::default()
        };
        let groups = vec![ipc_group("goals", 40, None), ipc_group("pipe/8B", 9, None)];
        let a = result_of("ipc", groups.clone(), goals.clone());
        let b = result_of("ipc", groups, goals);
        let c = Comparison::new("a", &a, "b", &b).unwrap();
        unique(&c.rows);
        let names: Vec<&str> = c
            .rows
            .iter()
            .filter(|r| r.group == "goals #2")
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "latency_tame-ring_8B_over_floor (counter)",
                "latency_tame-ring_8B_over_floor (derived)"
            ]
        );
        assert!(c
            .rows
            .iter()
            .any(|r| r.group == "goals" && r.name == "one_way_latency p50"));
    }

    #[test]
    fn a_merged_group_is_kept_unless_it_repeats_the_same_one_group_in_both() {
        let one = |label: &str, p99| {
            let g = group(label, p99, 3);
            result_of(
                "cycle",
                vec![g.clone()],
                GroupResult {
                    label: "all".into(),
                    cpu: None,
                    ..g
                },
            )
        };
        // Same CPU in both: `all` would repeat cpu1 row for row.
        let c = Comparison::new("a", &one("cpu1", 100), "b", &one("cpu1", 200)).unwrap();
        assert!(c.rows.iter().all(|r| r.group == "cpu1"));
        // Another CPU in B: `all` is what the two have in common, so it stays.
        let c = Comparison::new("a", &one("cpu1", 100), "b", &one("cpu2", 200)).unwrap();
        let groups: BTreeSet<&str> = c.rows.iter().map(|r| r.group.as_str()).collect();
        assert_eq!(groups, BTreeSet::from(["all", "cpu1", "cpu2"]));
        assert!(c.notes.iter().all(|n| !n.contains("not shown")));
        // Two CPUs in B: its `all` merges two groups, so both are kept.
        let mut two = one("cpu1", 200);
        two.result.groups.push(group("cpu2", 300, 3));
        let c = Comparison::new("a", &one("cpu1", 100), "b", &two).unwrap();
        assert!(c.rows.iter().any(|r| r.group == "all"));
        unique(&c.rows);
    }

    #[test]
    fn a_difference_is_weighed_against_the_spread_the_results_carry() {
        let ratios = GroupResult {
            label: "ratios".into(),
            ..GroupResult::default()
        };
        let run = |ring: (u64, f64, f64), pipe: (u64, f64, f64)| {
            result_of(
                "ipc",
                vec![
                    ipc_group("tame-ring/8B", ring.0, Some((ring.1, ring.2))),
                    ipc_group("pipe/8B", pipe.0, Some((pipe.1, pipe.2))),
                ],
                ratios.clone(),
            )
        };
        // The ring's rounds overlap (45..60 vs 55..70); the pipe's do not (13..15 µs vs 20..22 µs).
        let a = run((50, 45.0, 60.0), (14_000, 13_000.0, 15_000.0));
        let b = run((60, 55.0, 70.0), (21_000, 20_000.0, 22_000.0));
        let c = Comparison::new("a", &a, "b", &b).unwrap();
        let find = |g: &str, n: &str| c.rows.iter().find(|r| r.group == g && r.name == n).unwrap();
        let ring = find("tame-ring/8B", "one_way_latency p50");
        assert_eq!(ring.beyond_spread, Some(false));
        assert_eq!(
            ring.spread_a,
            Some(Spread {
                min: 45.0,
                max: 60.0
            })
        );
        assert_eq!(
            find("pipe/8B", "one_way_latency p50").beyond_spread,
            Some(true)
        );
        // A figure without a recorded spread says nothing.
        assert_eq!(find("pipe/8B", "one_way_latency p99").beyond_spread, None);
        let text = table(&c);
        assert!(text.lines().nth(1).unwrap().ends_with("spread"), "{text}");
        assert!(text.contains("pipe/8B       one_way_latency p50"), "{text}");
        let pipe_line = text
            .lines()
            .find(|l| l.starts_with("pipe/8B") && l.contains("p50"))
            .unwrap();
        assert!(pipe_line.ends_with("beyond"), "{pipe_line}");
        assert!(c.notes.last().unwrap().starts_with("spread: `beyond`"));
        // A result of one round carries none: then nothing is claimed, and that is said.
        let single = result_of(
            "ipc",
            vec![ipc_group("pipe/8B", 21_000, None)],
            ratios.clone(),
        );
        let c = Comparison::new("a", &a, "b", &single).unwrap();
        assert!(c.rows.iter().all(|r| r.beyond_spread.is_none()));
        assert!(c
            .notes
            .last()
            .unwrap()
            .starts_with("no run-to-run spread is known"));
        assert!(!table(&c).lines().nth(1).unwrap().contains("spread"));
    }

    #[test]
    fn all_of_several_threads_spreads_over_them() {
        let two = |p99s: [u64; 2]| {
            let groups = vec![group("cpu1", p99s[0], 1), group("cpu2", p99s[1], 1)];
            let merged = GroupResult {
                label: "all".into(),
                cpu: None,
                ..group("all", p99s[0].max(p99s[1]), 2)
            };
            result_of("cycle", groups, merged)
        };
        let c = Comparison::new("a", &two([100, 120]), "b", &two([300, 310])).unwrap();
        let find = |g: &str, n: &str| c.rows.iter().find(|r| r.group == g && r.name == n).unwrap();
        let p99 = find("all", "gap p99");
        assert_eq!(
            p99.spread_a,
            Some(Spread {
                min: 100.0,
                max: 120.0
            })
        );
        assert_eq!(p99.beyond_spread, Some(true));
        // p50 is 4 on every thread of both: within.
        assert_eq!(find("all", "gap p50").beyond_spread, Some(false));
        // Counts add up over threads: no spread; nor for one thread's own group.
        assert_eq!(find("all", "gap count").beyond_spread, None);
        assert_eq!(find("cpu1", "gap p99").beyond_spread, None);
    }

    /// A recorded sweep (`bench sleep --tasks 1,2,4`) as compare reads it, keeping the steps
    /// whose value is in `keep`.
    fn sweep_steps(keep: &[u64]) -> Vec<Step> {
        let sweep: crate::sweep::Sweep = serde_json::from_str(include_str!(
            "../../tame-report/tests/fixtures/recorded/sleep-sweep.json"
        ))
        .unwrap();
        sweep
            .values
            .iter()
            .zip(sweep.results)
            .filter(|(v, _)| keep.contains(v))
            .map(|(v, result)| {
                let step = Compared {
                    result,
                    noise: None,
                    watch: None,
                };
                (format!("{}={v}", sweep.parameter), step)
            })
            .collect()
    }

    #[test]
    fn two_sweeps_compare_step_by_step() {
        let (a, b) = (sweep_steps(&[1, 2, 4]), sweep_steps(&[2, 4]));
        let c = Comparison::of_sweeps("a.json", &a, "b.json", &b).unwrap();
        assert_eq!(c.bench, "sleep");
        unique(&c.rows);
        // Each common step's groups, prefixed by the step; the same result on both sides.
        let p99 = c
            .rows
            .iter()
            .find(|r| r.group == "tasks=4 all" && r.name == "jitter p99")
            .expect("tasks=4 all");
        assert_eq!((p99.diff, p99.ratio), (Some(0.0), Some(1.0)));
        assert!(c.rows.iter().any(|r| r.group == "tasks=2 task1"));
        assert!(c.rows.iter().all(|r| !r.group.starts_with("tasks=1 ")));
        assert!(
            c.notes
                .contains(&"steps only in A, not compared: tasks=1".to_string()),
            "{:?}",
            c.notes
        );
        assert!(table(&c).contains("tasks=4 all"));
        // No step in common: refused, naming each sweep's steps.
        let e = Comparison::of_sweeps("a.json", &sweep_steps(&[1]), "b.json", &b).unwrap_err();
        assert!(e.is_bad_input());
        assert!(
            e.to_string()
                .contains("a.json (tasks=1) and b.json (tasks=2, tasks=4) share no step"),
            "{e}"
        );
    }
}
