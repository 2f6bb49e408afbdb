//! An assess report: the verdict first, then its phases' results drawn as overlays
//! (shared vs partitioned), periodic wakeups and the busy loop.

use serde::Serialize;
use tame_assess::figures::{CycleFigures, JobFigures};
use tame_assess::report::Phase;
use tame_assess::requirement::{percent, rate};
use tame_assess::verdict::Holds;
use tame_assess::AssessReport;
use tame_bench::distribution::{bin_of, Distribution, BINS_PER_OCTAVE};
use tame_bench::{BenchResult, Calibration, GroupResult, Metric};

use crate::bench;
use crate::error::{invalid, Result};
use crate::model::Config;
use crate::page::{Cell, Page, Table, Verdict};

pub fn add(page: &mut Page, file: &str, r: &AssessReport) -> Result<()> {
    page.verdict = Some(verdict(r));
    // Both checks (shared, partitioned) find it: one fact, said once.
    for c in std::iter::once(&r.check).chain(r.check_partitioned.as_ref()) {
        for f in c.findings.iter().filter(|f| f.id == "timers.rt_throttling") {
            if matches!(word(&f.severity).as_str(), "warn" | "fail") {
                let text = format!("{} — {}", f.found, f.why);
                page.warn("", file, Some(crate::summary::RT_THROTTLING), text);
            }
        }
    }
    if r.interrupted {
        page.warn(
            "",
            file,
            None,
            "the assessment was interrupted (Ctrl-C) — the figures cover only what was measured"
                .into(),
        );
    }
    for n in &r.restoration.not_restored {
        let text = format!("not restored after the assessment: {n} (`tame revert` retries)");
        page.warn("", file, None, text);
    }
    if let Some(t) = rounds_table(r) {
        page.key_figures.push(t);
    }
    let mut cycles = Vec::new();
    let mut noises = Vec::new();
    for (label, phase) in [("shared", &r.shared), ("partitioned", &r.partitioned)] {
        let name = format!("{file} ({label})");
        if let Some(why) = &phase.not_measured {
            page.notes.push(format!("{name}: not measured — {why}"));
        }
        if let Some(job) = &phase.job {
            // tame.assess/2: the work's responses over every round of the configuration.
            cycles.push(Config {
                label: label.into(),
                file: name.clone(),
                result: from_job(r, phase, label, job),
                noise: None,
                watch: None,
            });
        }
        match (&phase.results.cycle, &phase.cycle) {
            (Some(result), _) => cycles.push(config(label, &name, result, None)?),
            (None, Some(figures)) => {
                page.notes.push(format!(
                    "{name}: no full results (written before assess embedded them): the histogram and tail curve are drawn from the phase's latency histogram; no time line and no noise figures"
                ));
                cycles.push(Config {
                    label: label.into(),
                    file: name.clone(),
                    result: from_figures(r, phase, label, figures),
                    noise: None,
                    watch: None,
                });
            }
            (None, None) => {}
        }
        if let Some(n) = &phase.results.noise {
            noises.push(config(label, &name, &n.result, Some(n.noise.clone()))?);
        }
    }
    // tame.assess/2: each round's busy loop, in the order the rounds ran.
    for round in &r.rounds {
        if let Some(n) = &round.results.noise {
            let label = format!("{} {}", round.configuration.name(), round.index);
            let name = format!("{file} ({label})");
            noises.push(config(&label, &name, &n.result, Some(n.noise.clone()))?);
        }
    }
    // The key figure: how the work's responses compare, shared and partitioned.
    page.lead.get_or_insert_with(|| "assess-cycle-tail".into());
    bench::add(page, &cycles, "assess-cycle")?;
    bench::add(page, &noises, "assess-noise")?;
    Ok(())
}

/// Each round's figures side by side: the spread a difference must exceed to be an effect.
fn rounds_table(r: &AssessReport) -> Option<Table> {
    let rows: Vec<Vec<Cell>> = r
        .effects
        .iter()
        .map(|e| {
            let values = |v: &[u64]| e.values_text(v, ", ");
            vec![
                Cell::text(&e.figure),
                Cell::stat("shared", values(&e.shared)),
                Cell::stat("partitioned", values(&e.partitioned)),
                Cell::stat("ratio", e.ratio.map_or("—".into(), |x| format!("{x:.2}×"))),
                Cell::stat(
                    "effect",
                    if e.effect {
                        "effect"
                    } else {
                        "within the spread"
                    },
                ),
            ]
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        id: "assess-rounds".into(),
        caption: format!(
            "each of the {} interleaved rounds per configuration (a difference is an effect only where the rounds do not overlap)",
            r.run_length.rounds
        ),
        head: ["figure", "shared, per round", "partitioned, per round", "ratio", "effect"]
            .map(String::from)
            .to_vec(),
        rows,
    })
}

/// A typed result as the common schema reads it.
fn config<S: Serialize>(
    label: &str,
    file: &str,
    result: &BenchResult<S>,
    noise: Option<tame_bench::noise::NoiseFindings>,
) -> Result<Config> {
    let result: BenchResult = serde_json::to_value(result)
        .and_then(serde_json::from_value)
        .map_err(|e| {
            invalid(format!(
                "{file}: its embedded result does not read in the common schema ({e})"
            ))
        })?;
    Ok(Config {
        label: label.into(),
        file: file.into(),
        result,
        noise,
        watch: None,
    })
}

/// A serde enum's word (`warn`, `not_met`).
fn word(v: &impl Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn verdict(r: &AssessReport) -> Verdict {
    let v = &r.verdict;
    let row = |name: &str, h: &Option<Holds>| -> Option<Vec<Cell>> {
        let h = h.as_ref()?;
        Some(vec![
            Cell::text(name),
            Cell::stat("holds", h.status_text()),
            Cell::stat("activations", h.activations.to_string()),
            Cell::stat("late", h.late.to_string()),
            // A share of activations reads as a percentage; the JSON keeps the fraction.
            Cell::share("late_fraction", h.late_fraction),
            Cell::stat(
                "miss_bound",
                match (h.miss_bound, h.confidence) {
                    (Some(b), Some(c)) => format!("< {} ({} conf.)", rate(b), percent(c)),
                    _ => "—".into(),
                },
            ),
            Cell::time("response_ns", "ns", h.response_ns),
            Cell::signed_time("margin_ns", "ns", h.margin_ns),
        ])
    };
    let rows: Vec<Vec<Cell>> = [row("shared", &v.shared), row("partitioned", &v.partitioned)]
        .into_iter()
        .flatten()
        .collect();
    let table = (!rows.is_empty()).then(|| Table {
        id: "verdict-figures".into(),
        caption: format!(
            "the requirement ({}) in each configuration",
            r.requirement.describe()
        ),
        head: [
            "configuration",
            "holds",
            "activations",
            "late",
            "late fraction",
            "miss rate bound",
            "response",
            "margin",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    });
    Verdict {
        outcome: word(&v.outcome),
        headline: v.headline.clone(),
        table,
        limits: v.limits.clone(),
        next_step: v.next_step.clone(),
        cost: v.cost.clone(),
        // What it rests on, and when that is too few activations for the claim, first.
        notes: (!v.rests_on.is_empty())
            .then(|| format!("it rests on: {}", v.rests_on))
            .into_iter()
            .chain(v.too_few.iter().map(|t| format!("WARNING: {t}")))
            .chain(v.notes.iter().cloned())
            .collect(),
    }
}

/// The configurations of an assess report as one result of the common schema, the way
/// `tame compare` compares two reports: a group per configuration measured (`shared`,
/// `partitioned`) with the work's response, run time and start delay (a tame.assess/1
/// report: the wakeup latency) and its activations and misses; a configuration not
/// measured is a group that says so.
pub fn phases_result(r: &AssessReport) -> BenchResult {
    let groups = [("shared", &r.shared), ("partitioned", &r.partitioned)]
        .into_iter()
        .map(|(label, phase)| {
            let measured = match (&phase.job, &phase.cycle) {
                (Some(job), _) => Some((from_job(r, phase, label, job).merged, job.activations)),
                (None, Some(f)) => Some((from_figures(r, phase, label, f).merged, f.activations)),
                (None, None) => None,
            };
            match measured {
                Some((mut group, activations)) => {
                    group.label = label.into();
                    group.counters.insert("activations".into(), activations);
                    group
                }
                None => GroupResult {
                    label: label.into(),
                    not_measured: Some(
                        phase
                            .not_measured
                            .clone()
                            .unwrap_or_else(|| "the report holds no figures of it".into()),
                    ),
                    ..GroupResult::default()
                },
            }
        })
        .collect();
    BenchResult {
        schema_version: <BenchResult as tame_host::Document>::SCHEMA.version,
        bench: "assess".into(),
        tool_version: r.tool_version.clone(),
        command_line: r.command_line.clone(),
        started_unix_ns: r.started_unix_ns,
        elapsed_ns: 0,
        interrupted: r.interrupted,
        environment: r.environment.clone(),
        calibration: Calibration::default(),
        load: None,
        partition: Some(r.machine.partition.clone()),
        settings: serde_json::to_value(&r.requirement).unwrap_or_default(),
        groups,
        merged: GroupResult {
            label: "all".into(),
            ..GroupResult::default()
        },
    }
}

/// A histogram of (value, count) in the distribution's bins.
fn distribution(histogram: &[(u64, u64)]) -> Option<Distribution> {
    let mut bins: Vec<[u64; 3]> = Vec::new();
    for &(value, count) in histogram {
        let (low, high) = bin_of(value);
        match bins.last_mut() {
            Some(b) if b[0] == low => b[2] += count,
            _ => bins.push([low, high, count]),
        }
    }
    (!bins.is_empty()).then_some(Distribution {
        per_octave: BINS_PER_OCTAVE,
        bins,
    })
}

/// A configuration's work over its rounds as a result: the response's summary and
/// histogram, the work's run time and start delay, the misses.
fn from_job(r: &AssessReport, phase: &Phase, label: &str, j: &JobFigures) -> BenchResult {
    let metric = |name: &str, summary, distribution| Metric {
        name: name.into(),
        unit: "ns".into(),
        summary,
        distribution,
    };
    let merged = GroupResult {
        label: "all".into(),
        metrics: vec![
            metric("response", j.response, distribution(&j.response_histogram)),
            metric("run_time", j.run_time, None),
            metric("start_delay", j.start_delay, None),
        ],
        counters: [
            ("misses".to_string(), j.misses),
            ("overruns".to_string(), j.overruns),
        ]
        .into_iter()
        .collect(),
        ..GroupResult::default()
    };
    BenchResult {
        schema_version: <BenchResult as tame_host::Document>::SCHEMA.version,
        bench: "job".into(),
        tool_version: r.tool_version.clone(),
        command_line: r.command_line.clone(),
        started_unix_ns: r.started_unix_ns,
        elapsed_ns: 0,
        interrupted: j.interrupted,
        environment: r.environment.clone(),
        calibration: Calibration::default(),
        load: phase.load.clone(),
        partition: (label == "partitioned").then(|| r.machine.partition.clone()),
        settings: serde_json::json!({
            "cpus": j.cpus.to_string(),
            "period_ns": j.period_ns,
            "deadline_ns": j.deadline_ns,
            "rounds": phase.rounds,
        }),
        groups: Vec::new(),
        merged,
    }
}

/// The phase's figures as a cycle result: the summary and the histogram, nothing more.
fn from_figures(r: &AssessReport, phase: &Phase, label: &str, f: &CycleFigures) -> BenchResult {
    let merged = GroupResult {
        label: "all".into(),
        metrics: vec![Metric {
            name: "latency".into(),
            unit: "ns".into(),
            summary: f.latency,
            distribution: distribution(&f.histogram),
        }],
        counters: [("missed_periods".to_string(), f.missed_periods)]
            .into_iter()
            .collect(),
        ..GroupResult::default()
    };
    BenchResult {
        schema_version: <BenchResult as tame_host::Document>::SCHEMA.version,
        bench: "cycle".into(),
        tool_version: r.tool_version.clone(),
        command_line: r.command_line.clone(),
        started_unix_ns: r.started_unix_ns,
        elapsed_ns: 0,
        interrupted: f.interrupted,
        environment: r.environment.clone(),
        calibration: Calibration::default(),
        load: phase.load.clone(),
        partition: (label == "partitioned").then(|| r.machine.partition.clone()),
        settings: serde_json::json!({ "cpus": f.cpus.to_string(), "interval_ns": f.period_ns }),
        groups: Vec::new(),
        merged,
    }
}
