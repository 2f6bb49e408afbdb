//! What the user's time-critical work needs: a period, the CPU time it needs per period,
//! the deadline that must hold, the share of activations that may miss it, and how many
//! isolated CPUs it needs. Checked before anything runs.

use serde::{Deserialize, Serialize};
use tame_rt::plural::count;

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
    /// How sure a verdict must be: the one-sided confidence of its miss-rate bounds
    /// (reports before tame.assess/2 stated none; read as the default).
    #[serde(default = "default_confidence")]
    pub confidence: f64,
}

/// `--confidence` unless given: 95 %.
pub const DEFAULT_CONFIDENCE: f64 = 0.95;

fn default_confidence() -> f64 {
    DEFAULT_CONFIDENCE
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
            confidence: DEFAULT_CONFIDENCE,
        })
    }

    /// The same requirement stated with another confidence (above 0, below 1).
    pub fn with_confidence(mut self, confidence: f64) -> Result<Self, AssessError> {
        if !(confidence > 0.0 && confidence < 1.0) {
            return Err(invalid(format!(
                "--confidence {confidence} must be above 0 and below 1 — e.g. 0.95 or 95%"
            )));
        }
        self.confidence = confidence;
        Ok(self)
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
            "every {}, {} of work, deadline {}, {misses}, {}",
            human(self.period_ns),
            human(self.budget_ns),
            human(self.deadline_ns),
            count(u64::from(self.cpus), "isolated CPU", "isolated CPUs")
        )
    }
}

/// `--miss-rate`: a fraction (`0.001`) or a percentage (`0.1%`).
pub fn parse_miss_rate(text: &str) -> Result<f64, AssessError> {
    parse_fraction("--miss-rate", text, "0.001", "0.1%")
}

/// `--confidence`: a fraction (`0.95`) or a percentage (`95%`).
pub fn parse_confidence(text: &str) -> Result<f64, AssessError> {
    parse_fraction("--confidence", text, "0.95", "95%")
}

/// `--target-bound`: a fraction (`0.0001`) or a percentage (`0.01%`).
pub fn parse_target_bound(text: &str) -> Result<f64, AssessError> {
    parse_fraction("--target-bound", text, "0.0001", "0.01%")
}

/// A fraction written as one (`0.95`) or as a percentage (`95%`); the range is the caller's.
fn parse_fraction(
    flag: &str,
    text: &str,
    as_fraction: &str,
    as_percent: &str,
) -> Result<f64, AssessError> {
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
                "{flag} {text:?} is not a number — give a fraction such as {as_fraction} or a percentage such as {as_percent}"
            ))
        })
}

/// A probability in three significant digits: `0.1%`, `0.0192%` (a bound of 1.92·10⁻⁴),
/// below 0.001 % in exponent form (`3.0e-7%`).
pub fn rate(fraction: f64) -> String {
    let pct = fraction * 100.0;
    if pct == 0.0 {
        "0%".to_string()
    } else if pct >= 0.001 {
        let digits = (2 - pct.log10().floor() as i32).clamp(0, 6) as usize;
        let s = format!("{pct:.digits$}");
        let s = if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        };
        format!("{s}%")
    } else {
        format!("{pct:.1e}%")
    }
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

    #[test]
    fn bounds_read_in_three_digits() {
        assert_eq!(rate(0.000192), "0.0192%");
        assert_eq!(rate(0.2589), "25.9%");
        assert_eq!(rate(0.001), "0.1%");
        assert_eq!(rate(0.0), "0%");
        assert_eq!(rate(3e-9), "3.0e-7%");
        assert_eq!(parse_confidence("95%").unwrap(), 0.95);
        let r = Requirement::new(1_000_000, 0, None, 0.0, 1).unwrap();
        assert!(r.clone().with_confidence(1.0).unwrap_err().is_bad_input());
        assert_eq!(r.with_confidence(0.99).unwrap().confidence, 0.99);
    }
}
