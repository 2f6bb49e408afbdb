//! One run that repeats a bench over a range of one parameter (`tame bench sleep --tasks
//! 1..12`: the real-time-vs-real-fast study's figure 8, jitter against the number of
//! parallel tasks). Each step is a whole result of the common schema; the sweep document
//! holds them in order, and its table is the primary metric against the parameter.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result};
use crate::result::BenchResult;
use crate::stats::PercentileCells;
use tame_rt::duration::{format_ns_as, NsStyle};

impl<S> tame_host::Document for Sweep<S> {
    const SCHEMA: tame_host::Schema = tame_host::schema!(Tagged "tame.sweep", 1);
}
/// Steps one sweep may have at most: each is a whole run.
pub const MAX_STEPS: usize = 64;

/// The values a swept parameter takes: `4`, `1..12` (both ends included) or `1,2,4,8`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Steps(Vec<usize>);

impl Steps {
    /// Parse `text` for the option `flag`; every value must lie in `1..=max`.
    pub fn parse(text: &str, flag: &str, max: usize) -> Result<Self> {
        let bad = |why: &str| {
            invalid(format!(
                "{flag} {text:?}: {why} — give one number (4), a range (1..12, both ends included) or a list (1,2,4,8), each 1..{max}"
            ))
        };
        let number = |s: &str| -> Result<usize> {
            let n: usize = s
                .trim()
                .parse()
                .map_err(|_| bad(&format!("{:?} is not a whole number", s.trim())))?;
            if n == 0 || n > max {
                return Err(bad(&format!("{n} is out of range")));
            }
            Ok(n)
        };
        let values = if let Some((low, high)) = text.split_once("..") {
            let (low, high) = (number(low)?, number(high.trim_start_matches('='))?);
            if low > high {
                return Err(bad("the range runs backwards"));
            }
            (low..=high).collect()
        } else {
            let mut values = Vec::new();
            for part in text.split(',') {
                let n = number(part)?;
                if values.contains(&n) {
                    return Err(bad(&format!("{n} is given twice")));
                }
                values.push(n);
            }
            values
        };
        if values.len() > MAX_STEPS {
            return Err(bad(&format!(
                "{} steps are more than {MAX_STEPS} runs",
                values.len()
            )));
        }
        Ok(Steps(values))
    }

    pub fn values(&self) -> &[usize] {
        &self.0
    }

    /// A single value: an ordinary run, not a sweep.
    pub fn single(&self) -> Option<usize> {
        match self.0.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }
}

/// Results of one bench over the values of one parameter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sweep<S = serde_json::Value> {
    /// The sweep's schema tag (`tame.sweep/1`, its `Document::SCHEMA`).
    pub schema: String,
    pub bench: String,
    /// The swept setting, as it is named in each result's `settings` (`tasks`).
    pub parameter: String,
    /// The values asked for, in order; `results` may be shorter when Ctrl-C ended the sweep.
    pub values: Vec<u64>,
    /// The exact command line of the sweep (each result has its own step's).
    pub command_line: Vec<String>,
    /// True when Ctrl-C ended the sweep early.
    pub interrupted: bool,
    pub results: Vec<BenchResult<S>>,
}

impl<S: Serialize> Sweep<S> {
    pub fn new(bench: &str, parameter: &str, values: &[usize], command_line: Vec<String>) -> Self {
        Sweep {
            schema: <Self as tame_host::Document>::SCHEMA.tag.into(),
            bench: bench.into(),
            parameter: parameter.into(),
            values: values.iter().map(|&v| v as u64).collect(),
            command_line,
            interrupted: false,
            results: Vec::new(),
        }
    }

    /// The human view: `metric` of the merged group per step (p50, p99, p99.9, max) and how
    /// each step's p99 compares with the first step's.
    pub fn table(&self, metric: &str) -> String {
        let mut s = format!(
            "{} sweep over {}: {metric} of all tasks merged\n",
            self.bench, self.parameter
        );
        let mut rows = vec![[
            self.parameter.as_str(),
            "count",
            "p50",
            "p99",
            "p99.9",
            "max",
            "p99/first",
        ]
        .map(String::from)
        .to_vec()];
        let mut first_p99 = None;
        let mut cells = PercentileCells::default();
        for (value, result) in self.values.iter().zip(&self.results) {
            let Some(m) = result.merged.metric(metric) else {
                rows.push(vec![value.to_string(), format!("(no {metric} measured)")]);
                continue;
            };
            let m = &m.summary;
            let fixed = |v| format_ns_as(v, NsStyle::Fixed);
            // A ratio of p99s only where both are supported by their samples.
            let p99 = m.supports(0.99).then_some(m.p99);
            let first = *first_p99.get_or_insert(p99);
            rows.push(vec![
                value.to_string(),
                m.count.to_string(),
                cells.cell(m.count, 0.50, m.p50, fixed),
                cells.cell(m.count, 0.99, m.p99, fixed),
                cells.cell(m.count, 0.999, m.p99_9, fixed),
                fixed(m.max),
                match (p99, first) {
                    (Some(v), Some(base)) => ratio(v, base),
                    _ => "-".into(),
                },
            ]);
        }
        write_table(&mut s, &rows);
        if let Some(note) = cells.footnote() {
            let _ = writeln!(s, "{note}");
        }
        if self.interrupted {
            let _ = writeln!(
                s,
                "interrupted: {} of {} steps measured",
                self.results.len(),
                self.values.len()
            );
        }
        s
    }
}

/// Rows aligned as the bench tables are; a short row (a step without the metric) as it is.
fn write_table(out: &mut String, rows: &[Vec<String>]) {
    let full: Vec<Vec<String>> = rows.iter().filter(|r| r.len() > 2).cloned().collect();
    let aligned = crate::compare::aligned(&full, &[0]);
    let mut lines = aligned.lines();
    for row in rows {
        if row.len() > 2 {
            let _ = writeln!(out, "{}", lines.next().unwrap_or_default());
        } else {
            let _ = writeln!(out, "{}", row.join(" "));
        }
    }
}

fn ratio(value: u64, base: u64) -> String {
    if base == 0 {
        "-".into()
    } else {
        format!("{:.2}", value as f64 / base as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{GroupResult, Metric};
    use crate::stats::Recorder;

    #[test]
    fn steps_are_a_number_a_range_or_a_list() {
        let p = |t| Steps::parse(t, "--tasks", 1024);
        assert_eq!(p("4").unwrap().single(), Some(4));
        assert_eq!(p("1..12").unwrap().values(), (1..=12).collect::<Vec<_>>());
        assert_eq!(p("1..=3").unwrap().values(), [1, 2, 3]);
        assert_eq!(p("1, 2,4,8").unwrap().values(), [1, 2, 4, 8]);
        assert_eq!(p("3..3").unwrap().single(), Some(3));
        for (bad, why) in [
            ("0", "0 is out of range"),
            ("1..2000", "2000 is out of range"),
            ("12..1", "the range runs backwards"),
            ("1,x", "\"x\" is not a whole number"),
            ("", "\"\" is not a whole number"),
            ("2,2", "2 is given twice"),
            ("1..100", "100 steps are more than 64 runs"),
        ] {
            let e = p(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(e.contains("give one number (4), a range (1..12"), "{e}");
        }
    }

    fn result_with_p99(values: &[u64]) -> BenchResult {
        let mut r = Recorder::new();
        values.iter().for_each(|&v| r.record(v));
        let merged = GroupResult {
            label: "all".into(),
            metrics: vec![Metric {
                name: "jitter".into(),
                unit: "ns".into(),
                summary: r.summary(),
                distribution: None,
            }],
            ..GroupResult::default()
        };
        BenchResult {
            schema_version: <BenchResult as tame_host::Document>::SCHEMA.version,
            bench: "sleep".into(),
            tool_version: "t".into(),
            command_line: vec![],
            started_unix_ns: 0,
            elapsed_ns: 0,
            interrupted: false,
            environment: Default::default(),
            calibration: Default::default(),
            load: None,
            partition: None,
            settings: serde_json::Value::Null,
            groups: vec![],
            merged,
        }
    }

    #[test]
    fn the_table_is_the_metric_against_the_parameter() {
        let mut sweep = Sweep::new("sleep", "tasks", &[1, 2, 4], vec![]);
        sweep.results.push(result_with_p99(&[10_000; 1_000]));
        sweep.results.push(result_with_p99(&[30_000; 1_000]));
        sweep.interrupted = true;
        let t = sweep.table("jitter");
        assert!(t.contains("sleep sweep over tasks: jitter"), "{t}");
        let rows: Vec<&str> = t.lines().skip(2).collect();
        assert!(
            rows[0].trim_start().starts_with("1 ") && rows[0].ends_with("1.00"),
            "{t}"
        );
        assert!(
            rows[1].trim_start().starts_with("2 ") && rows[1].ends_with("3.00"),
            "{t}"
        );
        // 1 000 samples support p99, not p99.9: that column says so once, under the rows.
        assert!(rows[0].contains("n/a"), "{t}");
        assert_eq!(
            rows[2],
            "n/a: too few samples for the percentile (at least 10 must lie beyond it): p99.9 needs ≥ 10 000 samples"
        );
        assert_eq!(rows[3], "interrupted: 2 of 3 steps measured");
        let json = crate::json::pretty(&sweep).unwrap();
        let back: Sweep = serde_json::from_str(&json).unwrap();
        assert_eq!(back, sweep);
        assert_eq!(back.schema, <Sweep as tame_host::Document>::SCHEMA.tag);
    }
}
