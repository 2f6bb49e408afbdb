//! The human table of a result: one row per group and metric, then counters, derived
//! figures and the run's circumstances.

use std::fmt::Write as _;

use tame_host::environment::RunEnvironment;

use crate::result::{BenchResult, Calibration, GroupResult, Metric};
use crate::stats::PercentileCells;
use tame_rt::duration::{format_ns_as, NsStyle};

/// The summary table: one row per group and metric, then counters and the run's self-characterisation.
pub fn table<S>(result: &BenchResult<S>, title: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{title}");
    let mut cells = PercentileCells::default();
    write_aligned(&mut out, &metric_rows(result, &mut cells));
    if let Some(note) = cells.footnote() {
        let _ = writeln!(out, "{note}");
    }
    let counters = counters_line(&result.merged);
    if !counters.is_empty() {
        let _ = writeln!(out, "{counters}");
    }
    for line in derived_lines(result) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "{}",
        circumstances_line(&result.calibration, &result.environment)
    );
    out.push_str(&run_notes(result));
    out
}

/// The last lines of every bench's table: the load it ran under, and whether Ctrl-C cut it short.
pub fn run_notes<S>(result: &BenchResult<S>) -> String {
    let mut out = String::new();
    if let Some(load) = &result.load {
        let kinds: Vec<&str> = load.kinds.iter().map(|k| k.name()).collect();
        let _ = writeln!(out, "load: {} on CPUs {}", kinds.join(","), load.cpus);
    }
    if result.interrupted {
        let _ = writeln!(
            out,
            "interrupted: these numbers cover the part of the run measured before Ctrl-C"
        );
    }
    out
}

const TABLE_HEADER: [&str; 11] = [
    "group", "metric", "count", "min", "p50", "p90", "p99", "p99.9", "p99.99", "p99.999", "max",
];

/// The groups the table shows: each thread's, then the merged one when there are several.
fn shown_groups<S>(result: &BenchResult<S>) -> impl Iterator<Item = &GroupResult> {
    let show_merged = result.groups.len() > 1;
    result
        .groups
        .iter()
        .chain(show_merged.then_some(&result.merged))
}

/// The header, then one row per shown group and metric.
fn metric_rows<S>(result: &BenchResult<S>, cells: &mut PercentileCells) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = vec![TABLE_HEADER.iter().map(|s| s.to_string()).collect()];
    for g in shown_groups(result) {
        rows.extend(g.metrics.iter().map(|m| metric_row(&g.label, m, cells)));
    }
    rows
}

fn metric_row(label: &str, m: &Metric, cells: &mut PercentileCells) -> Vec<String> {
    let s = &m.summary;
    let mut row = vec![
        label.to_string(),
        m.name.clone(),
        s.count.to_string(),
        human_value(s.min, &m.unit),
    ];
    row.extend(
        s.quantiles()
            .iter()
            .map(|&(q, v)| cells.cell(s.count, q, v, |v| human_value(v, &m.unit))),
    );
    row.push(human_value(s.max, &m.unit));
    row
}

/// A figure for people: nanoseconds in their best unit, other units (cycles) as the number.
fn human_value(v: u64, unit: &str) -> String {
    if unit == "ns" {
        format_ns_as(v, NsStyle::Fixed)
    } else {
        v.to_string()
    }
}

/// Each column padded to its widest cell: names left-aligned, figures right-aligned.
fn write_aligned(out: &mut String, rows: &[Vec<String>]) {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                let pad = " ".repeat(widths[c] - cell.chars().count());
                if c < 2 {
                    format!("{cell}{pad}")
                } else {
                    format!("{pad}{cell}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
}

/// `label: name value, …` for each shown group with derived figures; the merged group
/// `all` is labelled `worst`.
fn derived_lines<S>(result: &BenchResult<S>) -> Vec<String> {
    shown_groups(result)
        .filter(|g| !g.derived.is_empty())
        .map(|g| {
            let figures: Vec<String> = g
                .derived
                .iter()
                .map(|(k, v)| format!("{k} {v:.4}"))
                .collect();
            // A merged group of its own kind (cache's `slowdown`) keeps its label.
            let label = if std::ptr::eq(g, &result.merged) && g.label == "all" {
                "worst"
            } else {
                g.label.as_str()
            };
            format!("{label}: {}", figures.join(", "))
        })
        .collect()
}

/// The cpuidle driver; in a guest without one, why an isolated idle CPU's median can be
/// worse than a busy shared one's.
fn idle_text(env: &RunEnvironment) -> String {
    match (env.cpuidle_driver.as_deref(), &env.hypervisor) {
        (Some("none"), Some(_)) => {
            "none (an idle vCPU halts, so waking an idle CPU goes through the hypervisor: an isolated, idle CPU can wake slower than a busy shared one)".to_string()
        }
        (driver, _) => driver.unwrap_or("-").to_string(),
    }
}

/// The clock and the machine the numbers were taken on.
fn circumstances_line(c: &Calibration, env: &RunEnvironment) -> String {
    format!(
        "clock {} (read {} ns, loop floor {} ns){}; kernel {} preempt {}; idle {}; clocksource {}; {}{}{}",
        c.clock.map_or("-".to_string(), |k| format!("{k:?}").to_lowercase()),
        c.clock_read_cost_ns,
        c.loop_floor_ns,
        c.tsc_hz
            .map_or(String::new(), |hz| format!(", TSC {:.3} GHz", hz as f64 / 1e9)),
        env.kernel_release,
        env.preemption_model,
        idle_text(env),
        env.clocksource.as_deref().unwrap_or("-"),
        env.hypervisor.as_deref().map_or("bare metal".to_string(), |h| format!(
            "virtualised ({h}): hypervisor noise no guest setting removes"
        )),
        if env.isolation_parameters.is_empty() {
            "; no isolation boot parameters".to_string()
        } else {
            format!("; boot: {}", env.isolation_parameters.join(" "))
        },
        if env.security_parameters.is_empty() {
            String::new()
        } else {
            format!("; security: {}", env.security_parameters.join(" "))
        },
    )
}

fn counters_line(g: &GroupResult) -> String {
    g.counters
        .iter()
        .filter(|(k, v)| **v > 0 || k.as_str() == "missed_periods")
        .map(|(k, v)| format!("{k}: {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn testdata(json: &str) -> serde_json::Value {
        serde_json::from_str(json).unwrap()
    }

    fn result(value: serde_json::Value) -> BenchResult {
        serde_json::from_value(value).unwrap()
    }

    /// One group with counters and derived figures, a TSC clock, a hypervisor and boot
    /// parameters. The expected text was produced by `table` before it was split into pieces.
    #[test]
    fn table_of_a_noise_run_is_unchanged() {
        let r = result(testdata(include_str!(
            "../../testdata/compare/a-noise.json"
        )));
        let expected = concat!(
            "tame bench noise\n",
            "group  metric  count     min      p50  p90  p99  p99.9  p99.99  p99.999      max\n",
            "cpu0   gap        64  1112ns  17.70µs  n/a  n/a    n/a     n/a      n/a  4.043ms\n",
            "n/a: too few samples for the percentile (at least 10 must lie beyond it): p90 needs ≥ 100 samples, p99 needs ≥ 1 000 samples, p99.9 needs ≥ 10 000 samples, p99.99 needs ≥ 100 000 samples, p99.999 needs ≥ 1 000 000 samples\n",
            "gaps: 64, loops: 2063654, noise_ns: 21137376, run_ns: 52807209\n",
            "cpu0: cpu_available_percent 59.9726, noise_share_percent 40.0274\n",
            "clock tsc (read 10 ns, loop floor 9 ns), TSC 2.445 GHz; kernel 6.18.44-fc-v782 preempt dynamic; idle none (an idle vCPU halts, so waking an idle CPU goes through the hypervisor: an isolated, idle CPU can wake slower than a busy shared one); clocksource tsc; virtualised (KVM): hypervisor noise no guest setting removes; boot: mitigations=auto,no_guest_host,no_guest_guest\n",
        );
        assert_eq!(table(&r, "tame bench noise"), expected);
    }

    /// Mitigation boot parameters are said apart from the isolation ones.
    #[test]
    fn security_parameters_follow_the_isolation_ones() {
        let mut v = testdata(include_str!("../../testdata/compare/a-sleep.json"));
        v["environment"]["isolation_parameters"] = serde_json::json!(["isolcpus=1"]);
        v["environment"]["security_parameters"] = serde_json::json!(["mitigations=off", "nopti"]);
        let text = table(&result(v.clone()), "tame bench sleep");
        assert!(
            text.ends_with("; boot: isolcpus=1; security: mitigations=off nopti\n"),
            "{text}"
        );
        v["environment"]["isolation_parameters"] = serde_json::json!([]);
        let text = table(&result(v), "tame bench sleep");
        assert!(
            text.ends_with("; no isolation boot parameters; security: mitigations=off nopti\n"),
            "{text}"
        );
    }

    /// Two groups and their merged row, counters that are all zero (no counters line).
    #[test]
    fn table_of_a_sleep_run_is_unchanged() {
        let r = result(testdata(include_str!(
            "../../testdata/compare/a-sleep.json"
        )));
        let expected = concat!(
            "tame bench sleep\n",
            "group  metric  count      min      p50      p90  p99  p99.9  p99.99  p99.999      max\n",
            "task0  jitter    300  25.52µs  63.07µs  72.00µs  n/a    n/a     n/a      n/a  4.575ms\n",
            "task1  jitter    300  20.65µs  61.85µs  69.06µs  n/a    n/a     n/a      n/a  3.779ms\n",
            "all    jitter    600  20.65µs  62.46µs  71.04µs  n/a    n/a     n/a      n/a  4.575ms\n",
            "n/a: too few samples for the percentile (at least 10 must lie beyond it): p99 needs ≥ 1 000 samples, p99.9 needs ≥ 10 000 samples, p99.99 needs ≥ 100 000 samples, p99.999 needs ≥ 1 000 000 samples\n",
            "clock monotonic (read 30 ns, loop floor 29 ns); kernel 6.18.44-fc-v782 preempt dynamic; idle none (an idle vCPU halts, so waking an idle CPU goes through the hypervisor: an isolated, idle CPU can wake slower than a busy shared one); clocksource tsc; virtualised (KVM): hypervisor noise no guest setting removes; boot: mitigations=auto,no_guest_host,no_guest_guest\n",
        );
        assert_eq!(table(&r, "tame bench sleep"), expected);
    }

    /// Two groups (so the merged row shows), derived figures on a group and on the merged
    /// one (labelled "worst"), a metric in cycles, a load, an interrupted run, no clock, no
    /// TSC, no hypervisor and no boot parameters. Expected text as above.
    #[test]
    fn table_with_every_optional_line_is_unchanged() {
        let mut v = testdata(include_str!("../../testdata/compare/a-sleep.json"));
        v["groups"][0]["derived"] = serde_json::json!({ "max_excess_percent": 1.5 });
        v["merged"]["derived"] = serde_json::json!({ "max_excess_percent": 2.25, "ratio": 0.125 });
        v["merged"]["counters"]["missed_periods"] = 0.into();
        v["merged"]["counters"]["early_wakeups"] = 3.into();
        let mut cycles = v["groups"][1]["metrics"][0].clone();
        cycles["name"] = "cost".into();
        cycles["unit"] = "cycles".into();
        v["groups"][1]["metrics"]
            .as_array_mut()
            .unwrap()
            .push(cycles);
        v["load"] = serde_json::json!({ "kinds": ["cpu", "io"], "cpus": "1", "commands": [] });
        v["interrupted"] = true.into();
        v["environment"]["hypervisor"] = serde_json::Value::Null;
        v["environment"]["cpuidle_driver"] = serde_json::Value::Null;
        v["environment"]["isolation_parameters"] = serde_json::json!([]);
        v["calibration"]["clock"] = serde_json::Value::Null;
        let expected = concat!(
            "tame bench sleep\n",
            "group  metric  count      min      p50      p90  p99  p99.9  p99.99  p99.999      max\n",
            "task0  jitter    300  25.52µs  63.07µs  72.00µs  n/a    n/a     n/a      n/a  4.575ms\n",
            "task1  jitter    300  20.65µs  61.85µs  69.06µs  n/a    n/a     n/a      n/a  3.779ms\n",
            "task1  cost      300    20646    61855    69055  n/a    n/a     n/a      n/a  3779183\n",
            "all    jitter    600  20.65µs  62.46µs  71.04µs  n/a    n/a     n/a      n/a  4.575ms\n",
            "n/a: too few samples for the percentile (at least 10 must lie beyond it): p99 needs ≥ 1 000 samples, p99.9 needs ≥ 10 000 samples, p99.99 needs ≥ 100 000 samples, p99.999 needs ≥ 1 000 000 samples\n",
            "early_wakeups: 3, missed_periods: 0\n",
            "task0: max_excess_percent 1.5000\n",
            "worst: max_excess_percent 2.2500, ratio 0.1250\n",
            "clock - (read 30 ns, loop floor 29 ns); kernel 6.18.44-fc-v782 preempt dynamic; idle -; clocksource tsc; bare metal; no isolation boot parameters\n",
            "load: cpu,io on CPUs 1\n",
            "interrupted: these numbers cover the part of the run measured before Ctrl-C\n",
        );
        assert_eq!(table(&result(v), "tame bench sleep"), expected);
    }
}
