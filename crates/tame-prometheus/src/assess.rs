//! An assess report as series: the verdict (one series per outcome, 1 for the one given),
//! and per phase whether the requirement held, the late fraction, the response time and
//! the margin; its checks as tame check's series (`scope` `as_found`, `partitioned`).

use tame_assess::verdict::{Holds, Outcome};
use tame_assess::AssessReport;

use crate::writer::{labels, Exposition, Kind, WriteError};

const OUTCOMES: [(Outcome, &str); 4] = [
    (Outcome::RealFastIsEnough, "real_fast_is_enough"),
    (Outcome::PartitionNeeded, "partition_needed"),
    (Outcome::NotMet, "not_met"),
    (Outcome::Unknown, "unknown"),
];

pub fn add(e: &mut Exposition, r: &AssessReport) -> Result<(), WriteError> {
    e.declare(
        "tame_assess_verdict",
        Kind::Gauge,
        "tame assess's verdict: 1 for the outcome given, 0 for the others.",
    )?;
    for (o, name) in OUTCOMES {
        e.sample(
            "tame_assess_verdict",
            &labels(&[("outcome", name)]),
            f64::from(u8::from(r.verdict.outcome == o)),
        )?;
    }
    e.declare(
        "tame_assess_holds",
        Kind::Gauge,
        "1 when the requirement held in the phase (shared or partitioned), else 0.",
    )?;
    e.declare(
        "tame_assess_late_ratio",
        Kind::Gauge,
        "The fraction of activations that finished late in the phase, 0-1.",
    )?;
    e.declare(
        "tame_assess_response_seconds",
        Kind::Gauge,
        "The response time in the phase: the latency at the tolerated miss rate (the maximum when hard) plus the budget and what interruptions add to it, in seconds.",
    )?;
    e.declare(
        "tame_assess_margin_seconds",
        Kind::Gauge,
        "The deadline minus the response time in the phase, in seconds (negative: missed by that much).",
    )?;
    let phases: [(&str, Option<&Holds>); 2] = [
        ("shared", r.verdict.shared.as_ref()),
        ("partitioned", r.verdict.partitioned.as_ref()),
    ];
    for (phase, holds) in phases {
        let Some(h) = holds else { continue };
        let l = labels(&[("phase", phase)]);
        e.sample("tame_assess_holds", &l, f64::from(u8::from(h.holds)))?;
        e.sample("tame_assess_late_ratio", &l, h.late_fraction)?;
        e.sample(
            "tame_assess_response_seconds",
            &l,
            h.response_ns as f64 / 1e9,
        )?;
        e.sample("tame_assess_margin_seconds", &l, h.margin_ns as f64 / 1e9)?;
    }
    crate::check::add(e, &r.check, "as_found")?;
    if let Some(c) = &r.check_partitioned {
        crate::check::add(e, c, "partitioned")?;
    }
    Ok(())
}
