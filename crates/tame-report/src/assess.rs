//! An assess report: the verdict first, then its phases' results drawn as overlays
//! (shared vs partitioned), periodic wakeups and the busy loop.

use serde::Serialize;
use tame_assess::figures::CycleFigures;
use tame_assess::report::Phase;
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
    for c in std::iter::once(&r.check).chain(r.check_partitioned.as_ref()) {
        for f in c.findings.iter().filter(|f| f.id == "timers.rt_throttling") {
            if matches!(word(&f.severity).as_str(), "warn" | "fail") {
                page.warnings
                    .push(format!("{file}: {} — {}", f.found, f.why));
            }
        }
    }
    if r.interrupted {
        page.warnings.push(format!("{file}: the assessment was interrupted (Ctrl-C) — the figures cover only what was measured"));
    }
    for n in &r.restoration.not_restored {
        page.warnings.push(format!(
            "{file}: not restored after the assessment: {n} (`tame revert` retries)"
        ));
    }
    let mut cycles = Vec::new();
    let mut noises = Vec::new();
    for (label, phase) in [("shared", &r.shared), ("partitioned", &r.partitioned)] {
        let name = format!("{file} ({label})");
        if let Some(why) = &phase.not_measured {
            page.notes.push(format!("{name}: not measured — {why}"));
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
                });
            }
            (None, None) => {}
        }
        if let Some(n) = &phase.results.noise {
            noises.push(config(label, &name, &n.result, Some(n.noise.clone()))?);
        }
    }
    bench::add(page, &cycles, "assess-cycle")?;
    bench::add(page, &noises, "assess-noise")?;
    Ok(())
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
            Cell::stat("holds", if h.holds { "yes" } else { "no" }),
            Cell::stat("activations", h.activations.to_string()),
            Cell::stat("late", h.late.to_string()),
            // A share of activations reads as a percentage; the JSON keeps the fraction.
            Cell::stat("late_fraction", format!("{:.4} %", h.late_fraction * 100.0)),
            Cell::stat("response_ns", h.response_ns.to_string()),
            Cell::stat("margin_ns", h.margin_ns.to_string()),
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
            "response (ns)",
            "margin (ns)",
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
        notes: v.notes.clone(),
    }
}

/// The phase's figures as a cycle result: the summary and the histogram, nothing more.
fn from_figures(r: &AssessReport, phase: &Phase, label: &str, f: &CycleFigures) -> BenchResult {
    let mut bins: Vec<[u64; 3]> = Vec::new();
    for &(value, count) in &f.histogram {
        let (low, high) = bin_of(value);
        match bins.last_mut() {
            Some(b) if b[0] == low => b[2] += count,
            _ => bins.push([low, high, count]),
        }
    }
    let merged = GroupResult {
        label: "all".into(),
        metrics: vec![Metric {
            name: "latency".into(),
            unit: "ns".into(),
            summary: f.latency,
            distribution: (!bins.is_empty()).then_some(Distribution {
                per_octave: BINS_PER_OCTAVE,
                bins,
            }),
        }],
        counters: [("missed_periods".to_string(), f.missed_periods)]
            .into_iter()
            .collect(),
        ..GroupResult::default()
    };
    BenchResult {
        schema_version: 1,
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
