//! The summary at the top: key figures per configuration (times as the bench tables print
//! them, the JSON's values beside), their ratios between configurations, and every warning a
//! result carries.

use crate::model::{Config, Series};
use crate::page::{ratio, Cell, Page, Table};

/// The key figures of each series (rows): times as the bench tables print them, each
/// with its value as the JSON holds it.
pub fn key_figures(id: &str, caption: &str, series: &[Series]) -> Table {
    let with_missed = series.iter().any(|s| s.metric == "latency");
    let mut head = [
        "configuration",
        "count",
        "p50",
        "p99",
        "p99.9",
        "p99.999",
        "max",
    ]
    .map(String::from)
    .to_vec();
    if with_missed {
        head.push("missed periods".into());
    }
    let rows = series
        .iter()
        .map(|s| {
            let (m, unit) = (&s.summary, s.unit.as_str());
            let p = |stat, q, v| Cell::percentile(stat, m, unit, q, v);
            let mut row = vec![
                Cell::text(s.label.clone()),
                Cell::stat("count", m.count.to_string()),
                p("p50", 0.50, m.p50),
                p("p99", 0.99, m.p99),
                p("p99.9", 0.999, m.p99_9),
                p("p99.999", 0.99999, m.p99_999),
                Cell::time("max", unit, m.max),
            ];
            if with_missed {
                row.push(Cell::stat("missed_periods", s.missed.to_string()));
            }
            row
        })
        .collect();
    Table {
        id: id.to_string(),
        caption: caption.to_string(),
        head,
        rows,
    }
}

/// A row of a key-figures table for a configuration with no figures: why, across it.
pub fn not_measured_row(label: &str, columns: usize) -> Vec<Cell> {
    let mut row = vec![Cell::text(label), Cell::stat("count", NOT_MEASURED)];
    row.resize(columns, Cell::text("—"));
    row
}

/// What a table shows for a configuration its run never reached.
pub const NOT_MEASURED: &str = "not measured";

/// Each configuration's figures over the first's (`partitioned / shared`); `None` for one.
pub fn ratios(id: &str, caption: &str, series: &[Series]) -> Option<Table> {
    let (base, rest) = series.split_first()?;
    if rest.is_empty() {
        return None;
    }
    let head = ["ratio", "p50", "p99", "p99.9", "max"]
        .map(String::from)
        .to_vec();
    let b = &base.summary;
    let rows = rest
        .iter()
        .map(|s| {
            let m = &s.summary;
            let r = |x: u64, y: u64| ratio(x as f64, y as f64);
            // A ratio of percentiles only where both sides' samples support them.
            let rq = |q: f64, x: u64, y: u64| {
                if m.supports(q) && b.supports(q) {
                    r(x, y)
                } else {
                    "n/a".to_string()
                }
            };
            vec![
                Cell::text(format!("{} / {}", s.label, base.label)),
                Cell::stat("p50", rq(0.50, m.p50, b.p50)),
                Cell::stat("p99", rq(0.99, m.p99, b.p99)),
                Cell::stat("p99.9", rq(0.999, m.p99_9, b.p99_9)),
                Cell::stat("max", r(m.max, b.max)),
            ]
        })
        .collect();
    Some(Table {
        id: id.to_string(),
        caption: caption.to_string(),
        head,
        rows,
    })
}

/// The benches whose measuring thread runs busy (no sleep between its iterations): only a
/// busy real-time thread meets RT throttling.
const BUSY: [&str; 4] = ["fwq", "noise", "mem", "cache"];

/// Whether RT throttling can stop this result's measuring threads: a busy loop at a
/// real-time policy (fifo, rr; a result that does not say is taken as such).
fn throttled(r: &tame_bench::BenchResult) -> bool {
    let policy = r.settings["threads"]["policy"].as_str();
    BUSY.contains(&r.bench.as_str()) && policy.is_none_or(|p| p == "fifo" || p == "rr")
}

/// What the result of `c` warns of, added to the page once per fact (see [`Page::warn`]):
/// the hypervisor, RT throttling where it can stop a busy real-time loop, a run cut short,
/// missed periods, raw samples not kept, for noise results lost trace events, gaps not
/// kept and attribution that did not run, and for watch results lost trace events.
pub fn warn(page: &mut Page, c: &Config) {
    let r = &c.result;
    let mut warn = |key: Option<&str>, text: String| page.warn(&c.label, &c.file, key, text);
    if let Some(h) = &r.environment.hypervisor {
        warn(None, format!(
            "ran under the hypervisor {h} — the host can stop the guest in ways no guest setting removes; latencies include them"
        ));
    }
    if let Some(b) = r.environment.rt_bandwidth.filter(|_| throttled(r)) {
        if b.runtime_us >= 0 && (b.runtime_us as u64) < b.period_us {
            warn(Some(RT_THROTTLING), format!(
                "RT throttling was on (sched_rt_runtime_us {} of sched_rt_period_us {}) — a real-time thread that keeps its CPU longer in a period is stopped for the rest of it: a busy real-time loop (fwq, noise) shows that as noise",
                b.runtime_us, b.period_us
            ));
        }
    }
    if r.interrupted {
        warn(
            None,
            "interrupted (Ctrl-C) — the figures cover only what was measured".into(),
        );
    }
    let missed = c.counter("missed_periods");
    if missed > 0 {
        warn(
            None,
            format!("{missed} missed periods — the thread could not run for whole periods"),
        );
    }
    let dropped = c.counter("samples_dropped");
    if dropped > 0 {
        warn(None, format!(
            "{dropped} raw samples dropped from the --samples file (its buffer was full); the statistics count every sample"
        ));
    }
    if let Some(n) = &c.noise {
        if !n.attribution.available {
            warn(
                None,
                format!(
                    "noise not attributed to its sources — {}",
                    n.attribution
                        .reason
                        .as_deref()
                        .unwrap_or("the result does not say why")
                ),
            );
        }
        for cpu in &n.cpus {
            if cpu.events_lost > 0 {
                warn(None, format!(
                    "CPU {}: {} trace events lost (events_lost) — some gaps' attribution is incomplete",
                    cpu.cpu, cpu.events_lost
                ));
            }
            if cpu.gaps_dropped > 0 {
                warn(None, format!(
                    "CPU {}: {} gaps counted but not kept (gaps_dropped) — their sizes are in the totals, not attributed",
                    cpu.cpu, cpu.gaps_dropped
                ));
            }
        }
        for p in &n.attribution.restore_problems {
            warn(None, format!("tracing setting not restored: {p}"));
        }
    }
    if let Some(f) = &c.watch {
        for (cpu, lost) in f.trace.lost.iter().filter(|(_, n)| **n > 0) {
            warn(None, format!(
                "CPU {cpu}: {lost} trace events dropped by the kernel before they were read — activations around them may be missing or merged, their causes incomplete"
            ));
        }
        for p in &f.trace.restore_problems {
            warn(None, format!("tracing setting not restored: {p}"));
        }
    }
}

/// The key of the one fact that RT throttling is, however worded (a result's environment,
/// an assessment's check).
pub const RT_THROTTLING: &str = "rt_throttling";
