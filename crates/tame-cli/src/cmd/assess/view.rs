//! The terminal summary of an assessment: shared and partitioned side by side with
//! ratios, then the verdict, what limits it, the next step and its cost.

use std::fmt::Write as _;
use std::path::Path;

use tame_assess::figures::{JobFigures, NoiseFigures};
use tame_assess::report::{AssessReport, Phase};
use tame_assess::requirement::{percent, rate};
use tame_assess::verdict::{self, Holds, Outcome};
use tame_check::Severity;
use tame_rt::duration::{format_ns_as, NsStyle};
use tame_rt::plural::count;

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
    knobs(&mut s, r);
    if let Some(c) = &r.calibration {
        let _ = writeln!(
            s,
            "the work: {} steps over a {} working set, calibrated undisturbed on CPU {} to {} (took {} median, {} max over {} trials)",
            c.work.steps,
            tame_bench::mem::sweep::human_size(c.work.working_set_bytes),
            c.cpu,
            ns(c.budget_ns),
            ns(c.run_time.p50),
            ns(c.run_time.max),
            c.trials
        );
    }
    if let Some(p) = &r.program {
        let _ = writeln!(
            s,
            "the work: your program `{}`, watched (tame watch) shared and inside the partition; the verdict is about {}",
            p.command.join(" "),
            match &p.threads {
                Some(t) => format!("its threads --threads {t} admits, merged"),
                None => "its thread with the most activations".into(),
            }
        );
    }
    let _ = writeln!(
        s,
        "measured {} per configuration in {} each{}",
        ns(r.run_length.per_configuration_ns),
        count(
            u64::from(r.run_length.rounds),
            "round",
            "interleaved rounds"
        ),
        match (r.run_length.auto_target_bound, r.run_length.capped) {
            (Some(b), false) => format!(
                " (--duration auto: enough to show a miss rate below {} with no miss)",
                rate(b)
            ),
            (Some(b), true) => format!(
                " (--duration auto, cut to --max-duration: too short to show {} with no miss)",
                rate(b)
            ),
            _ => String::new(),
        }
    );
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

/// The partition's knobs beyond CPUs: set or why not, and what the rounds saw.
fn knobs(s: &mut String, r: &AssessReport) {
    for k in &r.knobs {
        let mark = if k.applied { "set" } else { "not set" };
        let _ = writeln!(s, "  {} ({mark}): {} — {}", k.name, k.setting, k.why);
        if let Some(effect) = &k.effect {
            let _ = writeln!(s, "    measured: {effect}");
        }
    }
    for o in &r.reboot_options {
        let _ = writeln!(s, "  needs a reboot: {} — {}", o.parameter, o.reason);
    }
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
    text_row(s, label, &cell(shared), &cell(part), &ratio(shared, part));
}

/// Shared over partitioned, where both are known.
fn ratio(shared: Option<u64>, part: Option<u64>) -> String {
    match (shared, part) {
        (Some(a), Some(b)) if b > 0 => format!("{:.1}×", a as f64 / b as f64),
        _ => String::new(),
    }
}

fn text_row(s: &mut String, label: &str, shared: &str, part: &str, ratio: &str) {
    let _ = writeln!(s, "  {label:<22} {shared:>24} {part:>24} {ratio:>8}");
}

fn ns(v: u64) -> String {
    format_ns_as(v, NsStyle::Fixed)
}

/// A percentile of the response, or why it is not shown.
fn percentile_row(
    s: &mut String,
    label: &str,
    q: f64,
    r: &AssessReport,
    pick: fn(&JobFigures) -> u64,
) {
    let cell = |p: &Phase| {
        p.job.as_ref().map_or("—".to_string(), |j| {
            tame_bench::stats::percentile_text(j.activations, q, pick(j), ns)
        })
    };
    let value = |p: &Phase| {
        p.job
            .as_ref()
            .filter(|j| tame_bench::stats::supports(j.activations, q))
            .map(pick)
    };
    let ratio = ratio(value(&r.shared), value(&r.partitioned));
    text_row(s, label, &cell(&r.shared), &cell(&r.partitioned), &ratio);
}

fn table(s: &mut String, r: &AssessReport) {
    let (sh, pa) = (&r.shared, &r.partitioned);
    let _ = writeln!(
        s,
        "  {:<22} {:>24} {:>24} {:>8}",
        if sh.load.is_some() {
            "under load"
        } else {
            "no load"
        },
        heading("shared", sh),
        heading("partitioned", pa),
        "ratio"
    );
    let j = |p: &Phase, f: fn(&JobFigures) -> u64| p.job.as_ref().map(f);
    row(
        s,
        "activations",
        j(sh, |j| j.activations),
        j(pa, |j| j.activations),
        |v| v.to_string(),
    );
    percentile_row(s, "response p50", 0.5, r, |j| j.response.p50);
    percentile_row(s, "p99", 0.99, r, |j| j.response.p99);
    percentile_row(s, "p99.9", 0.999, r, |j| j.response.p99_9);
    row(
        s,
        "max",
        j(sh, |j| j.response.max),
        j(pa, |j| j.response.max),
        ns,
    );
    percentile_row(s, "the work alone p50", 0.5, r, |j| j.run_time.p50);
    percentile_row(s, "p99", 0.99, r, |j| j.run_time.p99);
    percentile_row(s, "wakeup p50", 0.5, r, |j| j.start_delay.p50);
    row(s, "misses", j(sh, |j| j.misses), j(pa, |j| j.misses), |v| {
        v.to_string()
    });
    let (vs, vp) = (r.verdict.shared.as_ref(), r.verdict.partitioned.as_ref());
    let bound = |h: Option<&Holds>| {
        h.and_then(|h| h.miss_bound)
            .map_or("—".to_string(), |b| format!("< {}", rate(b)))
    };
    text_row(
        s,
        &format!("miss rate ({} conf.)", percent(r.requirement.confidence)),
        &bound(vs),
        &bound(vp),
        "",
    );
    row(
        s,
        "overruns",
        j(sh, |j| j.overruns),
        j(pa, |j| j.overruns),
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
        ns,
    );
    match verdict::load_kept(&r.requirement, sh, pa) {
        Some(verdict::LoadKept::Ratio(ratio)) => text_row(
            s,
            "load throughput",
            "100%",
            &format!("{:.0}%", ratio * 100.0),
            "",
        ),
        // Too short a phase for stress-ng's rates: the cost line says why.
        Some(verdict::LoadKept::TooShort { .. }) => {
            text_row(s, "load throughput", "too short", "too short", "")
        }
        None => {}
    }
    if sh.load.as_ref().is_some_and(|l| l.command.is_some()) {
        // The user's own load (--load-cmd) reports no rate tame can read.
        text_row(s, "load throughput", "not measured", "not measured", "");
    }
    for (name, p) in [("shared", sh), ("partitioned", pa)] {
        if let Some(why) = &p.not_measured {
            let _ = writeln!(s, "  {name}: not measured — {why}");
        }
    }
    let holds = |h: Option<&Holds>| {
        h.map_or("—".to_string(), |h| {
            let word = h.status_text();
            let room = if h.margin_ns >= 0 {
                "to spare"
            } else {
                "short"
            };
            format!("{word} ({} {room})", ns(h.margin_ns.unsigned_abs()))
        })
    };
    text_row(s, "requirement", &holds(vs), &holds(vp), "");
    effects(s, r);
}

/// Round-to-round spread, and which differences exceed it.
fn effects(s: &mut String, r: &AssessReport) {
    if r.effects.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "  rounds (shared | partitioned, each round; an effect only where they do not overlap):"
    );
    for e in &r.effects {
        let values = |v: &[u64]| e.values_text(v, " ");
        let verdict = match (e.effect, e.ratio) {
            (true, Some(ratio)) => format!("effect, {ratio:.2}×"),
            (true, None) => "effect".to_string(),
            (false, _) => "within the spread".to_string(),
        };
        let _ = writeln!(
            s,
            "    {:<18} {} | {} — {verdict}",
            e.figure,
            values(&e.shared),
            values(&e.partitioned)
        );
    }
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
        Outcome::Inconclusive => "INCONCLUSIVE",
        Outcome::Unknown => "UNDECIDED",
    };
    let _ = writeln!(s, "verdict: {word}: {}", v.headline);
    if !v.rests_on.is_empty() {
        let _ = writeln!(s, "it rests on: {}", v.rests_on);
    }
    if let Some(few) = &v.too_few {
        let _ = writeln!(s, "WARNING: {few}");
    }
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
                "WARNING: reverting left {} unrestored (the journal is kept; fix the cause and run tame revert): {}",
                tame_rt::plural::count(r.restoration.not_restored.len() as u64, "change", "changes"),
                r.restoration.not_restored.join("; ")
            );
        }
    }
}
