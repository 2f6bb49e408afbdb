//! The terminal summary of an assessment: shared and partitioned side by side with
//! ratios, then the verdict, what limits it, the next step and its cost.

use std::fmt::Write as _;
use std::path::Path;

use tame_assess::figures::{CycleFigures, NoiseFigures};
use tame_assess::report::{AssessReport, Phase};
use tame_assess::verdict::{self, Outcome};
use tame_check::Severity;
use tame_rt::duration::{format_ns_as, NsStyle};

pub fn summary(r: &AssessReport, out_dir: &Path, page: Option<&Path>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "tame assess — {}", r.requirement.describe());
    machine(&mut s, r);
    let _ = writeln!(
        s,
        "isolate CPU {} (partition {:?}); the system and the load keep CPU {}",
        r.layout.isolated, r.layout.partition, r.layout.system
    );
    for why in &r.layout.reasons {
        let _ = writeln!(s, "  {why}");
    }
    for warning in &r.layout.warnings {
        let _ = writeln!(s, "  plan warns: {warning}");
    }
    let _ = writeln!(s);
    table(&mut s, r);
    let _ = writeln!(s);
    verdict_text(&mut s, r);
    let _ = writeln!(
        s,
        "\nwritten to {}: spec.toml, the raw results of each phase, assess.json{}",
        out_dir.display(),
        if r.interrupted { " (interrupted)" } else { "" }
    );
    if let Some(page) = page {
        let _ = writeln!(
            s,
            "figures: {} (open it in a browser; each figure is also an SVG file beside it)",
            page.display()
        );
    }
    s
}

fn machine(s: &mut String, r: &AssessReport) {
    let e = &r.environment;
    let count = |sev: Severity| {
        r.check
            .findings
            .iter()
            .filter(|f| f.severity == sev)
            .count()
    };
    let _ = writeln!(
        s,
        "machine: {} CPUs, kernel {} ({}){}; check: {} fail, {} warn (tame check --cpus {} shows them)",
        e.online_cpus.len(),
        e.kernel_release,
        e.preemption_model,
        e.hypervisor
            .as_deref()
            .map_or(String::new(), |h| format!(", virtualised ({h})")),
        count(Severity::Fail),
        count(Severity::Warn),
        r.layout.isolated
    );
}

/// One row: a label and the shared and partitioned texts, with their ratio where both are numbers.
fn row(
    s: &mut String,
    label: &str,
    shared: Option<u64>,
    part: Option<u64>,
    fmt: fn(u64) -> String,
) {
    let cell = |v: Option<u64>| v.map_or("—".to_string(), fmt);
    let ratio = match (shared, part) {
        (Some(a), Some(b)) if b > 0 => format!("{:.1}×", a as f64 / b as f64),
        _ => String::new(),
    };
    let _ = writeln!(
        s,
        "  {label:<22} {:>21} {:>21} {:>8}",
        cell(shared),
        cell(part),
        ratio
    );
}

fn table(s: &mut String, r: &AssessReport) {
    let (sh, pa) = (&r.shared, &r.partitioned);
    let _ = writeln!(
        s,
        "  {:<22} {:>21} {:>21} {:>8}",
        if sh.load.is_some() {
            "under load"
        } else {
            "no load"
        },
        heading("shared", sh),
        heading("partitioned", pa),
        "ratio"
    );
    let c = |p: &Phase, f: fn(&CycleFigures) -> u64| p.cycle.as_ref().map(f);
    row(
        s,
        "wakeup latency p50",
        c(sh, |c| c.latency.p50),
        c(pa, |c| c.latency.p50),
        |ns| format_ns_as(ns, NsStyle::Fixed),
    );
    row(
        s,
        "p99",
        c(sh, |c| c.latency.p99),
        c(pa, |c| c.latency.p99),
        |ns| format_ns_as(ns, NsStyle::Fixed),
    );
    row(
        s,
        "p99.9",
        c(sh, |c| c.latency.p99_9),
        c(pa, |c| c.latency.p99_9),
        |ns| format_ns_as(ns, NsStyle::Fixed),
    );
    row(
        s,
        "max",
        c(sh, |c| c.latency.max),
        c(pa, |c| c.latency.max),
        |ns| format_ns_as(ns, NsStyle::Fixed),
    );
    row(
        s,
        "missed periods",
        c(sh, |c| c.missed_periods),
        c(pa, |c| c.missed_periods),
        |v| v.to_string(),
    );
    let (vs, vp) = (r.verdict.shared.as_ref(), r.verdict.partitioned.as_ref());
    row(
        s,
        "late activations",
        vs.map(|h| h.late),
        vp.map(|h| h.late),
        |v| v.to_string(),
    );
    let n = |p: &Phase, f: fn(&NoiseFigures) -> u64| p.noise.as_ref().map(f);
    // Noise in parts per million of the run, shown as a percentage.
    let ppm = |n: &NoiseFigures| (n.share_percent * 10_000.0).round() as u64;
    row(s, "busy-loop noise", n(sh, ppm), n(pa, ppm), |v| {
        format!("{:.3}%", v as f64 / 10_000.0)
    });
    row(
        s,
        "longest gap",
        n(sh, |n| n.max_gap_ns),
        n(pa, |n| n.max_gap_ns),
        |ns| format_ns_as(ns, NsStyle::Fixed),
    );
    // What interruptions add to one computation of the budget.
    row(
        s,
        "budget stretch",
        vs.map(|h| h.stretch_ns)
            .filter(|_| sh.noise.as_ref().is_some_and(|n| n.stretch.is_some())),
        vp.map(|h| h.stretch_ns)
            .filter(|_| pa.noise.as_ref().is_some_and(|n| n.stretch.is_some())),
        |ns| format_ns_as(ns, NsStyle::Fixed),
    );
    if let Some(ratio) = verdict::throughput_ratio(sh.load.as_ref(), pa.load.as_ref()) {
        let _ = writeln!(
            s,
            "  {:<22} {:>21} {:>21}",
            "load throughput",
            "100%",
            format!("{:.0}%", ratio * 100.0)
        );
    }
    for (name, p) in [("shared", sh), ("partitioned", pa)] {
        if let Some(why) = &p.not_measured {
            let _ = writeln!(s, "  {name}: not measured — {why}");
        }
    }
    let holds = |h: &Option<tame_assess::verdict::Holds>| {
        h.as_ref().map_or("—".to_string(), |h| {
            let room = if h.margin_ns >= 0 {
                "to spare"
            } else {
                "short"
            };
            let word = if h.holds { "yes" } else { "no" };
            format!(
                "{word} ({} {room})",
                format_ns_as(h.margin_ns.unsigned_abs(), NsStyle::Fixed)
            )
        })
    };
    let _ = writeln!(
        s,
        "  {:<22} {:>21} {:>21}",
        "requirement holds",
        holds(&r.verdict.shared),
        holds(&r.verdict.partitioned)
    );
}

fn heading(name: &str, p: &Phase) -> String {
    if p.policy.is_empty() {
        name.to_string()
    } else {
        format!("{name} ({})", p.policy)
    }
}

fn verdict_text(s: &mut String, r: &AssessReport) {
    let v = &r.verdict;
    let word = match v.outcome {
        Outcome::RealFastIsEnough => "MET — real fast is enough",
        Outcome::PartitionNeeded => "MET WITH A PARTITION — real time needs isolation here",
        Outcome::NotMet => "NOT MET",
        Outcome::Unknown => "UNDECIDED",
    };
    let _ = writeln!(s, "verdict: {word}: {}", v.headline);
    if !v.limits.is_empty() {
        let _ = writeln!(s, "what limits it:");
        for l in &v.limits {
            let _ = writeln!(s, "  - {l}");
        }
    }
    let _ = writeln!(s, "next step: {}", v.next_step);
    if let Some(cost) = &v.cost {
        let _ = writeln!(s, "cost: {cost}");
    }
    for n in &v.notes {
        let _ = writeln!(s, "note: {n}");
    }
    if r.restoration.recovered_earlier_run {
        let _ = writeln!(s, "note: an earlier, killed tame assess had left its partition applied; it was reverted first");
    }
    if r.partitioned.measured {
        if r.restoration.not_restored.is_empty() {
            let _ = writeln!(
                s,
                "the partition was reverted: {} journaled changes undone",
                r.restoration.changes_reverted
            );
        } else {
            let _ = writeln!(
                s,
                "WARNING: reverting left {} change(s) unrestored (the journal is kept; fix the cause and run tame revert): {}",
                r.restoration.not_restored.len(),
                r.restoration.not_restored.join("; ")
            );
        }
    }
}
