//! `tame check --json` as series: findings per severity, per category and severity, the
//! category scores as ratios, and each finding that is not ok by its stable id. Ids are
//! a fixed set (docs/check.md), so the per-id series stay bounded.

use tame_check::{CheckReport, Severity};

use crate::writer::{labels, with, Exposition, Kind, WriteError};

const SEVERITIES: [Severity; 4] = [Severity::Ok, Severity::Info, Severity::Warn, Severity::Fail];

fn severity_name(s: Severity) -> &'static str {
    match s {
        Severity::Ok => "ok",
        Severity::Info => "info",
        Severity::Warn => "warn",
        Severity::Fail => "fail",
    }
}

fn category_name(c: tame_check::Category) -> String {
    // The JSON name (snake_case), the same as docs/check.md uses.
    serde_json::to_value(c)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Add one check report; `scope` tells a check of an assess report's partition apart
/// (`as_found`, `partitioned`).
pub fn add(e: &mut Exposition, r: &CheckReport, scope: &str) -> Result<(), WriteError> {
    let scope_l = labels(&[("scope", scope)]);
    e.declare(
        "tame_check_findings",
        Kind::Gauge,
        "Findings of tame check on the checked CPUs, per severity (ok, info, warn, fail).",
    )?;
    for s in SEVERITIES {
        let n = r.findings.iter().filter(|f| f.severity == s).count();
        let l = with(&scope_l, &[("severity", severity_name(s))]);
        e.sample("tame_check_findings", &l, n as f64)?;
    }
    e.declare(
        "tame_check_category_findings",
        Kind::Gauge,
        "Findings of tame check per category and severity.",
    )?;
    e.declare(
        "tame_check_score_ratio",
        Kind::Gauge,
        "tame check's score per category, 0-1 (1: every finding ok or info; a warning counts half, a failure nothing).",
    )?;
    for sc in &r.scores {
        let cat = category_name(sc.category);
        for (s, n) in [
            (Severity::Ok, sc.ok),
            (Severity::Info, sc.info),
            (Severity::Warn, sc.warn),
            (Severity::Fail, sc.fail),
        ] {
            let l = with(
                &scope_l,
                &[("category", &cat), ("severity", severity_name(s))],
            );
            e.sample("tame_check_category_findings", &l, n as f64)?;
        }
        let l = with(&scope_l, &[("category", &cat)]);
        e.sample("tame_check_score_ratio", &l, f64::from(sc.score) / 100.0)?;
    }
    e.declare(
        "tame_check_finding",
        Kind::Gauge,
        "Findings of tame check that are not ok, by id (docs/check.md): how many with that id and severity.",
    )?;
    let mut by_id: std::collections::BTreeMap<(&str, String, Severity), usize> =
        std::collections::BTreeMap::new();
    for f in r.findings.iter().filter(|f| f.severity != Severity::Ok) {
        *by_id
            .entry((f.id.as_str(), category_name(f.category), f.severity))
            .or_default() += 1;
    }
    for ((id, cat, s), n) in by_id {
        let l = with(
            &scope_l,
            &[
                ("id", id),
                ("category", &cat),
                ("severity", severity_name(s)),
            ],
        );
        e.sample("tame_check_finding", &l, n as f64)?;
    }
    e.declare(
        "tame_check_cpus",
        Kind::Gauge,
        "How many CPUs tame check looked at (the isolated ones, or those it was given).",
    )?;
    e.sample("tame_check_cpus", &scope_l, r.cpus.len() as f64)?;
    Ok(())
}
