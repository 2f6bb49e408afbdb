//! `tame compare A.json B.json`: two results of the same bench side by side:
//! per group and metric (percentiles, counters, derived figures), and for
//! noise results per CPU, class and source, the difference B − A and the ratio B / A.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use serde::Serialize;
use tame_bench::output::human_ns;
use tame_bench::{BenchResult, GroupResult};

use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct CompareArgs {
    /// The baseline result (JSON from any `tame bench … --json`).
    a: PathBuf,
    /// The result compared with it (the same bench).
    b: PathBuf,
    /// Write the comparison as JSON to FILE, or `-` for stdout.
    #[arg(long, value_name = "FILE|-")]
    json: Option<String>,
}

/// One figure in both results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// group / metric / figure, e.g. `cpu1 / gap / p99`.
    pub group: String,
    pub name: String,
    /// "ns" for times, "" for counts and percentages.
    pub unit: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    pub diff: Option<f64>,
    pub ratio: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub bench: String,
    pub a: String,
    pub b: String,
    pub rows: Vec<Row>,
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

const FIGURES: &[&str] = &["count", "mean", "p50", "p99", "p99_9", "p99_999", "max"];

fn summary_value(g: &GroupResult, metric: &str, figure: &str) -> Option<(f64, String)> {
    let m = g.metric(metric)?;
    let v = serde_json::to_value(m.summary).ok()?;
    let unit = if figure == "count" {
        ""
    } else {
        m.unit.as_str()
    };
    Some((v.get(figure)?.as_f64()?, unit.to_string()))
}

fn groups_by_label(r: &BenchResult) -> BTreeMap<String, &GroupResult> {
    r.groups
        .iter()
        .chain(std::iter::once(&r.merged))
        .map(|g| (g.label.clone(), g))
        .collect()
}

/// Every figure of two results of the same bench.
pub fn compare(
    a: &BenchResult,
    b: &BenchResult,
    a_raw: &serde_json::Value,
    b_raw: &serde_json::Value,
) -> Vec<Row> {
    let mut rows = Vec::new();
    let (ga, gb) = (groups_by_label(a), groups_by_label(b));
    let labels: Vec<&String> = ga.keys().filter(|l| gb.contains_key(*l)).collect();
    for label in labels {
        let (x, y) = (ga[label], gb[label]);
        for m in &x.metrics {
            if y.metric(&m.name).is_none() {
                continue;
            }
            for f in FIGURES {
                let va = summary_value(x, &m.name, f);
                let vb = summary_value(y, &m.name, f);
                let unit = va.as_ref().map(|v| v.1.clone()).unwrap_or_default();
                rows.push(row(
                    label,
                    format!("{} {f}", m.name),
                    &unit,
                    va.map(|v| v.0),
                    vb.map(|v| v.0),
                ));
            }
        }
        let keys: std::collections::BTreeSet<&String> =
            x.counters.keys().chain(y.counters.keys()).collect();
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
        let keys: std::collections::BTreeSet<&String> =
            x.derived.keys().chain(y.derived.keys()).collect();
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
    rows.extend(noise_sources(a_raw, b_raw));
    rows
}

/// (cpu, class, source) → (count, total_ns, max_ns) from a noise result's `noise.cpus`.
fn sources(v: &serde_json::Value) -> BTreeMap<(u64, String, String), [f64; 3]> {
    let mut out = BTreeMap::new();
    let Some(cpus) = v.pointer("/noise/cpus").and_then(|c| c.as_array()) else {
        return out;
    };
    for c in cpus {
        let cpu = c.get("cpu").and_then(|x| x.as_u64()).unwrap_or(0);
        for s in c
            .get("sources")
            .and_then(|x| x.as_array())
            .into_iter()
            .flatten()
        {
            let text = |k: &str| s.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
            let num = |k: &str| s.get(k).and_then(|x| x.as_f64()).unwrap_or(0.0);
            out.insert(
                (cpu, text("class"), text("source")),
                [num("count"), num("total_ns"), num("max_ns")],
            );
        }
    }
    out
}

/// Per-source rows for noise results: a source absent from one side counts as zero there.
fn noise_sources(a: &serde_json::Value, b: &serde_json::Value) -> Vec<Row> {
    let (sa, sb) = (sources(a), sources(b));
    let mut keys: Vec<&(u64, String, String)> = sa.keys().chain(sb.keys()).collect();
    keys.sort();
    keys.dedup();
    // Biggest offenders (either side) first.
    let total = |k: &(u64, String, String)| {
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

fn read(path: &PathBuf) -> anyhow::Result<(BenchResult, serde_json::Value)> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        bad_input(format!(
            "cannot read {}: {e} — give the path of a result written with --json",
            path.display()
        ))
    })?;
    let raw: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        bad_input(format!(
            "{} is not JSON: {e} — give a result written with `tame bench … --json FILE`",
            path.display()
        ))
    })?;
    let result: BenchResult = serde_json::from_value(raw.clone()).map_err(|e| {
        bad_input(format!(
            "{} is not a tame bench result: {e} — give a result written with `tame bench … --json FILE`",
            path.display()
        ))
    })?;
    Ok((result, raw))
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

/// The human view: one line per figure.
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

pub fn run(_ctx: &Context, args: CompareArgs) -> anyhow::Result<i32> {
    let (a, a_raw) = read(&args.a)?;
    let (b, b_raw) = read(&args.b)?;
    if a.bench != b.bench {
        return Err(bad_input(format!(
            "{} is a `{}` result and {} a `{}` result — compare two results of the same bench",
            args.a.display(),
            a.bench,
            args.b.display(),
            b.bench
        )));
    }
    let json_out = match args.json.as_deref() {
        Some("-") | None => None,
        Some(p) => Some(std::fs::File::create(p).map_err(|e| {
            bad_input(format!(
                "cannot write {p}: {e} — choose a path in a writable directory"
            ))
        })?),
    };
    let comparison = Comparison {
        bench: a.bench.clone(),
        a: args.a.display().to_string(),
        b: args.b.display().to_string(),
        rows: compare(&a, &b, &a_raw, &b_raw),
    };
    let json = serde_json::to_string_pretty(&comparison).context("cannot encode the comparison")?;
    match (args.json.as_deref(), json_out) {
        (Some("-"), _) => {
            println!("{json}");
            eprint!("{}", table(&comparison));
        }
        (_, Some(mut f)) => {
            use std::io::Write;
            writeln!(f, "{json}").context("cannot write the comparison")?;
            print!("{}", table(&comparison));
        }
        _ => print!("{}", table(&comparison)),
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(
        label: &str,
        p99: u64,
        counter: u64,
        sources: serde_json::Value,
    ) -> serde_json::Value {
        let summary = json!({"count": 10, "min": 1, "mean": 5, "stddev": 1, "p50": 4, "p90": 8,
            "p99": p99, "p99_9": p99, "p99_99": p99, "p99_999": p99, "max": p99});
        let group = json!({"label": label, "cpu": 1,
            "metrics": [{"name": "gap", "unit": "ns", "summary": summary}],
            "counters": {"gaps": counter}, "derived": {"noise_share_percent": 2.0}});
        let mut merged = group.clone();
        merged["label"] = json!("all");
        json!({"schema_version": 1, "bench": "noise", "tool_version": "0", "command_line": [],
            "started_unix_ns": 0, "elapsed_ns": 0, "interrupted": false,
            "environment": serde_json::to_value(tame_host::environment::RunEnvironment::default()).unwrap(),
            "calibration": {"clock": null, "clock_read_cost_ns": 0, "loop_floor_ns": 0, "tsc_hz": null},
            "load": null, "settings": {}, "groups": [group], "merged": merged,
            "noise": {"cpus": [{"cpu": 1, "sources": sources}]}})
    }

    #[test]
    fn differences_and_ratios_per_metric_and_per_source() {
        let a = result(
            "cpu1",
            100,
            10,
            json!([{"class": "irq", "source": "irq 36 virtio", "count": 4, "total_ns": 400, "max_ns": 150}]),
        );
        let b = result(
            "cpu1",
            300,
            5,
            json!([{"class": "tick", "source": "local_timer", "count": 2, "total_ns": 20, "max_ns": 10}]),
        );
        let (ra, rb): (BenchResult, BenchResult) = (
            serde_json::from_value(a.clone()).unwrap(),
            serde_json::from_value(b.clone()).unwrap(),
        );
        let rows = compare(&ra, &rb, &a, &b);
        let find = |g: &str, n: &str| rows.iter().find(|r| r.group == g && r.name == n).unwrap();
        let p99 = find("cpu1", "gap p99");
        assert_eq!((p99.diff, p99.ratio), (Some(200.0), Some(3.0)));
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
        let first_source = rows
            .iter()
            .position(|r| r.group.starts_with("cpu1 "))
            .unwrap();
        assert_eq!(rows[first_source].group, "cpu1 irq");
        let text = table(&Comparison {
            bench: "noise".into(),
            a: "a".into(),
            b: "b".into(),
            rows,
        });
        assert!(text.contains("gap p99"), "{text}");
    }
}
