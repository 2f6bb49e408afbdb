//! An assess report as series: the verdict (one series per outcome, 1 for the one given),
//! and per phase whether the requirement held, the late fraction, the upper bound on the
//! miss rate (tame.assess/2 reports), the activations, the response time and the margin;
//! its checks as tame check's series (`scope` `as_found`, `partitioned`).

use tame_assess::verdict::{Holds, Outcome};
use tame_assess::AssessReport;

use crate::writer::{labels, Exposition, Kind, WriteError};

const OUTCOMES: [(Outcome, &str); 5] = [
    (Outcome::RealFastIsEnough, "real_fast_is_enough"),
    (Outcome::PartitionNeeded, "partition_needed"),
    (Outcome::NotMet, "not_met"),
    (Outcome::Inconclusive, "inconclusive"),
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
        "The response time in the phase, release to completion of the work, at the tolerated miss rate (the maximum when hard), in seconds (tame.assess/1 reports: the wakeup latency plus the budget and what interruptions add to it).",
    )?;
    e.declare(
        "tame_assess_margin_seconds",
        Kind::Gauge,
        "The deadline minus the response time in the phase, in seconds (negative: missed by that much).",
    )?;
    e.declare(
        "tame_assess_miss_rate_bound",
        Kind::Gauge,
        "The one-sided Clopper-Pearson upper bound on the miss rate in the phase, 0-1, at the confidence in the label (tame.assess/2 reports only).",
    )?;
    e.declare(
        "tame_assess_activations",
        Kind::Gauge,
        "The activations the phase's figures rest on.",
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
        e.sample("tame_assess_activations", &l, h.activations as f64)?;
        if let (Some(bound), Some(c)) = (h.miss_bound, h.confidence) {
            let confidence = format!("{c}");
            e.sample(
                "tame_assess_miss_rate_bound",
                &labels(&[("phase", phase), ("confidence", &confidence)]),
                bound,
            )?;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn exported(fixture: &str) -> String {
        let path = format!(
            "{}/../tame-assess/tests/fixtures/{fixture}",
            env!("CARGO_MANIFEST_DIR")
        );
        let r: AssessReport =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut e = Exposition::new();
        add(&mut e, &r).unwrap();
        e.render()
    }

    #[test]
    fn a_v2_report_exports_its_bounds_and_a_v1_report_still_exports() {
        let v2 = exported("dev-vm-v2.json");
        assert!(
            v2.contains(
                "tame_assess_miss_rate_bound{phase=\"partitioned\",confidence=\"0.95\"} 0.0026937"
            ),
            "{v2}"
        );
        assert!(
            v2.contains("tame_assess_activations{phase=\"shared\"} 3900"),
            "{v2}"
        );
        assert!(
            v2.contains("tame_assess_verdict{outcome=\"not_met\"} 1"),
            "{v2}"
        );
        assert!(
            v2.contains("tame_assess_verdict{outcome=\"inconclusive\"} 0"),
            "{v2}"
        );
        // tame.assess/1: its verdict and figures, and no bound it never stated.
        let v1 = exported("dev-vm-1ms.json");
        assert!(
            v1.contains("tame_assess_verdict{outcome=\"not_met\"} 1"),
            "{v1}"
        );
        assert!(
            v1.contains("tame_assess_late_ratio{phase=\"shared\"}"),
            "{v1}"
        );
        assert!(!v1.contains("tame_assess_miss_rate_bound{"), "{v1}");
    }
}
