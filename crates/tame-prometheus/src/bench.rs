//! Bench results (the common schema) as series: per measuring thread (`group`, `cpu`) each
//! timing metric as a summary in seconds with its quantiles p50 … p99.999 and its exact
//! maximum, the events counted in the run (missed periods, early wake-ups, dropped samples,
//! gaps) as gauges,
//! the percentages the bench derives as ratios 0–1, the run's start, length and whether it
//! was interrupted; and for results that carry the noise attribution, the time per class
//! and the top sources per CPU.

use std::collections::BTreeMap;

use tame_bench::compare::Compared;
use tame_bench::result::GroupResult;
use tame_bench::BenchResult;

use crate::names::{family, sanitise};
use crate::writer::{with, Exposition, Kind, Labels, WriteError};

/// The result's counters exported: events counted in one run. Gauges, not Prometheus counters
/// (`_total`): each export replaces the last run's file, so the value falls back whenever a run
/// counted fewer, and `rate()`/`increase()` would take that for a counter reset and lie. Others
/// are sizes or settings (`buffer_bytes`, `loops`), or times already given as metrics.
const RUN_COUNTS: &[(&str, &str)] = &[
    (
        "missed_periods",
        "periods the measuring thread woke too late to start on time",
    ),
    ("early_wakeups", "sleeps that ended before their deadline"),
    ("interrupted_sleeps", "sleeps a signal interrupted"),
    (
        "samples_dropped",
        "samples not recorded (the histogram's or timeline's room ran out)",
    ),
    ("gaps", "gaps above the noise threshold the detector saw"),
    ("gaps_dropped", "gaps counted but not kept for attribution"),
    (
        "misses",
        "activations whose response exceeded the deadline (tame watch)",
    ),
];

/// How many sources per CPU: the largest offenders, enough to act on, with a bound on the
/// series a fleet stores.
pub const TOP_SOURCES: usize = 5;

/// The quantiles of a summary its sample count supports (at least ten samples beyond
/// each); the others are left out rather than exported as the maximum under another name.
fn quantiles(s: &tame_bench::stats::Summary) -> Vec<(f64, u64)> {
    s.quantiles()
        .into_iter()
        .filter(|&(q, _)| s.supports(q))
        .collect()
}

/// A metric's unit as (the name's unit suffix, what to divide by for base units); None for
/// units Prometheus has no base unit for (a workload's throughput). Divided, not multiplied
/// by 1e-9: 45087 / 1e9 prints as 0.000045087, 45087 × 1e-9 as 0.000045087000000000004.
fn base_unit(unit: &str) -> Option<(&'static str, f64)> {
    match unit {
        "ns" => Some(("seconds", 1e9)),
        "ps" => Some(("seconds", 1e12)),
        "ppm" => Some(("ratio", 1e6)),
        "cycles" => Some(("cycles", 1.0)),
        _ => None,
    }
}

/// The labels every series of one result carries: `config` (the partition the result was
/// measured in, `shared` outside one, or what `--config` names) and `load` (the stress-ng
/// classes running beside it, `none`).
pub fn run_labels(result: &BenchResult, config: &str) -> Labels {
    let load = match &result.load {
        Some(l) if !l.kinds.is_empty() => l
            .kinds
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join("+"),
        _ => "none".into(),
    };
    vec![("config".into(), config.into()), ("load".into(), load)]
}

fn group_labels(run: &Labels, g: &GroupResult) -> Labels {
    let cpu = g.cpu.map(|c| c.to_string()).unwrap_or_default();
    with(run, &[("group", &g.label), ("cpu", &cpu)])
}

/// Add one result.
pub fn add(e: &mut Exposition, c: &Compared, config: &str) -> Result<(), WriteError> {
    let r = &c.result;
    let bench = sanitise(&r.bench);
    let run = run_labels(r, config);
    let mut with_bench = vec![("bench".to_string(), r.bench.clone())];
    with_bench.extend(run.iter().cloned());

    e.declare(
        "tame_bench_start_time_seconds",
        Kind::Gauge,
        "When the bench run started, in seconds since the Unix epoch.",
    )?;
    e.sample(
        "tame_bench_start_time_seconds",
        &with_bench,
        r.started_unix_ns as f64 / 1e9,
    )?;
    e.declare(
        "tame_bench_duration_seconds",
        Kind::Gauge,
        "How long the bench measured, in seconds.",
    )?;
    e.sample(
        "tame_bench_duration_seconds",
        &with_bench,
        r.elapsed_ns as f64 / 1e9,
    )?;
    e.declare(
        "tame_bench_interrupted",
        Kind::Gauge,
        "1 when Ctrl-C stopped the run early (its figures cover what was measured), else 0.",
    )?;
    e.sample(
        "tame_bench_interrupted",
        &with_bench,
        f64::from(u8::from(r.interrupted)),
    )?;

    for g in &r.groups {
        let labels = group_labels(&run, g);
        for m in &g.metrics {
            let Some((unit, divisor)) = base_unit(&m.unit) else {
                continue;
            };
            // `excess_cycles` in cycles is `tame_fwq_excess_cycles`, not `…_cycles_cycles`.
            let stem = m.name.strip_suffix(&format!("_{unit}")).unwrap_or(&m.name);
            let name = family(&bench, stem, unit);
            e.declare(
                &name,
                Kind::Summary,
                &format!(
                    "{} {} per measuring thread ({unit}; tame bench {}): quantiles 0.5 to 0.99999 from its HDR histogram, sum (mean x count) and count.",
                    r.bench, m.name, r.bench
                ),
            )?;
            let q: Vec<(f64, f64)> = quantiles(&m.summary)
                .iter()
                .map(|&(q, v)| (q, v as f64 / divisor))
                .collect();
            let s = &m.summary;
            e.summary(
                &name,
                &labels,
                &q,
                s.mean as f64 * s.count as f64 / divisor,
                s.count,
            )?;
            let max = family(&bench, &format!("{stem}_max"), unit);
            e.declare(
                &max,
                Kind::Gauge,
                &format!(
                    "The largest {} {} per measuring thread ({unit}, exact).",
                    r.bench, m.name
                ),
            )?;
            e.sample(&max, &labels, s.max as f64 / divisor)?;
        }
        for (counter, meaning) in RUN_COUNTS {
            let Some(&n) = g.counters.get(*counter) else {
                continue;
            };
            let name = family(&bench, counter, "");
            e.declare(
                &name,
                Kind::Gauge,
                &format!(
                    "{} per measuring thread in the run (a count of that run, replaced by the next export: not a counter): {meaning}.",
                    counter.replace('_', " ")
                ),
            )?;
            e.sample(&name, &labels, n as f64)?;
        }
        for (derived, &v) in &g.derived {
            let Some(stem) = derived.strip_suffix("_percent") else {
                continue;
            };
            let name = family(&bench, stem, "ratio");
            e.declare(
                &name,
                Kind::Gauge,
                &format!(
                    "{} ({derived} of tame bench {} per measuring thread, as a ratio 0-1).",
                    stem.replace('_', " "),
                    r.bench
                ),
            )?;
            e.sample(&name, &labels, v / 100.0)?;
        }
    }
    if let Some(noise) = &c.noise {
        add_noise(e, &with_bench, noise)?;
    }
    Ok(())
}

/// A source as a label: without the thread id a thread's source ends in
/// (`stress-ng-vm/18109` → `stress-ng-vm`), which would make a new series each run.
pub fn source_label(source: &str) -> &str {
    match source.rsplit_once('/') {
        Some((name, id)) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => source,
    }
}

fn add_noise(
    e: &mut Exposition,
    run: &Labels,
    noise: &tame_bench::noise::NoiseFindings,
) -> Result<(), WriteError> {
    e.declare(
        "tame_noise_class_seconds",
        Kind::Gauge,
        "Time the OS took from the measured CPU during the run, per class of activity (tick, softirq, thread, unexplained, ...), in seconds.",
    )?;
    e.declare(
        "tame_noise_source_seconds",
        Kind::Gauge,
        "Time the largest sources of noise took from the measured CPU during the run (top 5 per CPU; a thread's id left out), in seconds.",
    )?;
    e.declare(
        "tame_noise_attributed_ratio",
        Kind::Gauge,
        "The share of the noise time the trace explained (attributed to an OS activity), 0-1.",
    )?;
    for cpu in &noise.cpus {
        let l = with(run, &[("cpu", &cpu.cpu.to_string())]);
        for class in &cpu.classes {
            let lc = with(&l, &[("class", class.class.as_str())]);
            e.sample(
                "tame_noise_class_seconds",
                &lc,
                class.tally.total_ns as f64 / 1e9,
            )?;
        }
        // Sources named alike once their thread ids are left out are one source.
        let mut merged: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        for s in &cpu.sources {
            *merged
                .entry((s.class.as_str(), source_label(&s.source)))
                .or_default() += s.tally.total_ns;
        }
        let mut top: Vec<((&str, &str), u64)> = merged.into_iter().collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        for ((class, source), ns) in top.into_iter().take(TOP_SOURCES) {
            let ls = with(&l, &[("class", class), ("source", source)]);
            e.sample("tame_noise_source_seconds", &ls, ns as f64 / 1e9)?;
        }
        if let (Some(attributed), true) = (cpu.attributed_ns, cpu.noise_ns > 0) {
            e.sample(
                "tame_noise_attributed_ratio",
                &l,
                attributed as f64 / cpu.noise_ns as f64,
            )?;
        }
    }
    Ok(())
}
