//! The summary at the top: key figures per configuration exactly as the results hold them
//! (integer ns), their ratios between configurations, and every warning a result carries.

use crate::model::{Config, Series};
use crate::page::{ratio, Cell, Table};

/// The key figures of each series (rows) as the JSON holds them.
pub fn key_figures(id: &str, caption: &str, series: &[Series]) -> Table {
    let unit = series.first().map_or("ns", |s| s.unit.as_str());
    let with_missed = series.iter().any(|s| s.metric == "latency");
    let mut head = vec!["configuration".to_string(), "count".to_string()];
    for p in ["p50", "p99", "p99.9", "p99.999", "max"] {
        head.push(format!("{p} ({unit})"));
    }
    if with_missed {
        head.push("missed periods".into());
    }
    let rows = series
        .iter()
        .map(|s| {
            let m = &s.summary;
            let mut row = vec![
                Cell::text(s.label.clone()),
                Cell::stat("count", m.count.to_string()),
                Cell::stat("p50", m.percentile_text(0.50, m.p50, |v| v.to_string())),
                Cell::stat("p99", m.percentile_text(0.99, m.p99, |v| v.to_string())),
                Cell::stat(
                    "p99.9",
                    m.percentile_text(0.999, m.p99_9, |v| v.to_string()),
                ),
                Cell::stat(
                    "p99.999",
                    m.percentile_text(0.99999, m.p99_999, |v| v.to_string()),
                ),
                Cell::stat("max", m.max.to_string()),
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

/// What a result warns of: the hypervisor, RT throttling, a run cut short, missed periods,
/// raw samples not kept, for noise results lost trace events, gaps not kept and
/// attribution that did not run, and for watch results lost trace events.
pub fn warnings(c: &Config) -> Vec<String> {
    let r = &c.result;
    let who = format!("{} ({})", c.label, c.file);
    let mut w = Vec::new();
    if let Some(h) = &r.environment.hypervisor {
        w.push(format!(
            "{who}: ran under the hypervisor {h} — the host can stop the guest in ways no guest setting removes; latencies include them"
        ));
    }
    if let Some(b) = r.environment.rt_bandwidth {
        if b.runtime_us >= 0 && (b.runtime_us as u64) < b.period_us {
            w.push(format!(
                "{who}: RT throttling was on (sched_rt_runtime_us {} of sched_rt_period_us {}) — a real-time thread that keeps its CPU longer in a period is stopped for the rest of it: a busy real-time loop (fwq, noise) shows that as noise",
                b.runtime_us, b.period_us
            ));
        }
    }
    if r.interrupted {
        w.push(format!(
            "{who}: interrupted (Ctrl-C) — the figures cover only what was measured"
        ));
    }
    let missed = c.counter("missed_periods");
    if missed > 0 {
        w.push(format!(
            "{who}: {missed} missed periods — the thread could not run for whole periods"
        ));
    }
    let dropped = c.counter("samples_dropped");
    if dropped > 0 {
        w.push(format!(
            "{who}: {dropped} raw samples dropped from the --samples file (its buffer was full); the statistics count every sample"
        ));
    }
    if let Some(n) = &c.noise {
        if !n.attribution.available {
            w.push(format!(
                "{who}: noise not attributed to its sources — {}",
                n.attribution
                    .reason
                    .as_deref()
                    .unwrap_or("the result does not say why")
            ));
        }
        for cpu in &n.cpus {
            if cpu.events_lost > 0 {
                w.push(format!(
                    "{who}: CPU {}: {} trace events lost (events_lost) — some gaps' attribution is incomplete",
                    cpu.cpu, cpu.events_lost
                ));
            }
            if cpu.gaps_dropped > 0 {
                w.push(format!(
                    "{who}: CPU {}: {} gaps counted but not kept (gaps_dropped) — their sizes are in the totals, not attributed",
                    cpu.cpu, cpu.gaps_dropped
                ));
            }
        }
        for p in &n.attribution.restore_problems {
            w.push(format!("{who}: tracing setting not restored: {p}"));
        }
    }
    if let Some(f) = &c.watch {
        for (cpu, lost) in f.trace.lost.iter().filter(|(_, n)| **n > 0) {
            w.push(format!(
                "{who}: CPU {cpu}: {lost} trace events dropped by the kernel before they were read — activations around them may be missing or merged, their causes incomplete"
            ));
        }
        for p in &f.trace.restore_problems {
            w.push(format!("{who}: tracing setting not restored: {p}"));
        }
    }
    w
}
