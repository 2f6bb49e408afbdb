//! What the user's time-critical work needs: a period, the CPU time it needs per period,
//! the deadline that must hold, the share of activations that may miss it, and how many
//! isolated CPUs it needs. Checked before anything runs.

use serde::{Deserialize, Serialize};

use crate::error::{invalid, AssessError};

/// The shortest and longest period the periodic-wakeup measurement takes.
pub use tame_bench::cycle::{MAX_INTERVAL_NS as MAX_PERIOD_NS, MIN_INTERVAL_NS as MIN_PERIOD_NS};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Requirement {
    /// The task runs once every period.
    pub period_ns: u64,
    /// CPU time one activation needs.
    pub budget_ns: u64,
    /// From the intended start of an activation to the end of its work, at most.
    pub deadline_ns: u64,
    /// The fraction of activations that may end after the deadline (0: hard real time).
    pub miss_rate: f64,
    /// Isolated CPUs the work needs.
    pub cpus: u32,
}

impl Requirement {
    /// A checked requirement; the deadline defaults to the period.
    pub fn new(
        period_ns: u64,
        budget_ns: u64,
        deadline_ns: Option<u64>,
        miss_rate: f64,
        cpus: u32,
    ) -> Result<Self, AssessError> {
        if !(MIN_PERIOD_NS..=MAX_PERIOD_NS).contains(&period_ns) {
            return Err(invalid(format!(
                "--period {} is out of range — give 50us..10s",
                human(period_ns)
            )));
        }
        let deadline_ns = deadline_ns.unwrap_or(period_ns);
        if deadline_ns == 0 || deadline_ns > period_ns {
            return Err(invalid(format!(
                "--deadline {} must be above 0 and at most the period ({}) — an activation must end before the next one starts",
                human(deadline_ns),
                human(period_ns)
            )));
        }
        if budget_ns >= deadline_ns {
            return Err(invalid(format!(
                "--budget {} is not below the deadline {}: no activation could ever end in time — lower the budget or lengthen the deadline (or period)",
                human(budget_ns),
                human(deadline_ns)
            )));
        }
        if !(0.0..1.0).contains(&miss_rate) {
            return Err(invalid(format!(
                "--miss-rate {miss_rate} must be from 0 (hard: no miss) to below 1 — e.g. 0.001 or 0.1%"
            )));
        }
        if cpus == 0 {
            return Err(invalid(
                "--cpus 0: the work needs at least one CPU — give --cpus 1 or more",
            ));
        }
        Ok(Requirement {
            period_ns,
            budget_ns,
            deadline_ns,
            miss_rate,
            cpus,
        })
    }

    /// The longest wakeup latency an activation can have and still end in time.
    pub fn latency_bound_ns(&self) -> u64 {
        // Saturating: a report read back from disk was not built by `new`.
        self.deadline_ns.saturating_sub(self.budget_ns)
    }

    /// Hard: no activation may miss.
    pub fn is_hard(&self) -> bool {
        self.miss_rate == 0.0
    }

    /// One line: `every 1ms, 200µs of work, deadline 1ms, no miss`.
    pub fn describe(&self) -> String {
        let misses = if self.is_hard() {
            "no miss tolerated".to_string()
        } else {
            format!("{} of activations may miss", percent(self.miss_rate))
        };
        format!(
            "every {}, {} of work, deadline {}, {misses}, {} isolated CPU(s)",
            human(self.period_ns),
            human(self.budget_ns),
            human(self.deadline_ns),
            self.cpus
        )
    }
}

/// `--miss-rate`: a fraction (`0.001`) or a percentage (`0.1%`).
pub fn parse_miss_rate(text: &str) -> Result<f64, AssessError> {
    let t = text.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (t, 1.0),
    };
    number
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v / scale)
        .ok_or_else(|| {
            invalid(format!(
                "--miss-rate {text:?} is not a number — give a fraction such as 0.001 or a percentage such as 0.1%"
            ))
        })
}

/// A fraction as a percentage with the digits it needs.
pub fn percent(fraction: f64) -> String {
    format!("{}%", trim_float(fraction * 100.0))
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

pub(crate) fn human(ns: u64) -> String {
    tame_rt::duration::format_ns_as(ns, tame_rt::duration::NsStyle::Fixed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_defaults_to_the_period() {
        let r = Requirement::new(1_000_000, 200_000, None, 0.0, 1).unwrap();
        assert_eq!((r.deadline_ns, r.latency_bound_ns()), (1_000_000, 800_000));
        assert!(r.is_hard());
        assert!(
            r.describe().contains("no miss tolerated"),
            "{}",
            r.describe()
        );
    }

    #[test]
    fn impossible_requirements_are_bad_input() {
        let cases = [
            (
                Requirement::new(1_000_000, 1_000_000, None, 0.0, 1),
                "is not below the deadline",
            ),
            (
                Requirement::new(1_000_000, 0, Some(2_000_000), 0.0, 1),
                "at most the period",
            ),
            (Requirement::new(10_000, 0, None, 0.0, 1), "out of range"),
            (Requirement::new(1_000_000, 0, None, 1.0, 1), "below 1"),
            (
                Requirement::new(1_000_000, 0, None, 0.0, 0),
                "at least one CPU",
            ),
        ];
        for (r, words) in cases {
            let e = r.unwrap_err();
            assert!(e.is_bad_input() && e.to_string().contains(words), "{e}");
        }
    }

    #[test]
    fn miss_rates_are_fractions_or_percentages() {
        assert_eq!(parse_miss_rate("0.001").unwrap(), 0.001);
        assert_eq!(parse_miss_rate("0.1%").unwrap(), 0.001);
        assert_eq!(parse_miss_rate("0").unwrap(), 0.0);
        assert!(parse_miss_rate("often").unwrap_err().is_bad_input());
        assert!(parse_miss_rate("NaN").is_err());
        assert_eq!(percent(0.001), "0.1%");
    }
}
