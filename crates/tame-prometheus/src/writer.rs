//! A small, strict writer of the Prometheus text exposition format, version 0.0.4 — the
//! format node_exporter's textfile collector (1.5) and `promtool check metrics` read.
//!
//! Written here rather than taken from a crate: the official `prometheus-client` writes
//! OpenMetrics (`# EOF`, `_created`, `# UNIT`), which the textfile collector of
//! node_exporter 1.5 rejects, and the older `prometheus` crate brings a global registry and
//! protobuf for what is, here, a few hundred lines of formatting. Strict means: every name
//! and label name is checked against the format's grammar, label values and help texts are
//! escaped, each family is written once with its `# HELP` and `# TYPE`, and a series given
//! twice is an error (node_exporter would refuse the whole file).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The content type of what [`Exposition::render`] writes, for an HTTP answer.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The types of the text format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
    Summary,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
            Kind::Summary => "summary",
        }
    }
}

/// What the writer refuses: a programming error in the exporter or input it must not pass
/// on (a name built from a result's label that the format cannot carry).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    #[error("`{0}` is not a valid Prometheus metric name")]
    BadName(String),
    #[error("`{0}` is not a valid Prometheus label name")]
    BadLabel(String),
    #[error("{name} is declared once as {first} and once as {second}")]
    KindClash {
        name: String,
        first: &'static str,
        second: &'static str,
    },
    #[error("the series {0} is given twice")]
    Duplicate(String),
    #[error("{0} is not declared: declare its family first")]
    Undeclared(String),
}

/// A label set, in the order given.
pub type Labels = Vec<(String, String)>;

/// Build a label set from pairs: `labels(&[("cpu", "3")])`.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `base` with `more` after it: one series' labels among its family's.
pub fn with(base: &Labels, more: &[(&str, &str)]) -> Labels {
    let mut l = base.clone();
    l.extend(more.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    l
}

#[derive(Clone, Debug)]
struct Family {
    help: String,
    kind: Kind,
    /// (sample name, rendered labels) → value; the sample name is the family's, or with
    /// `_sum`/`_count` for a summary.
    samples: Vec<(String, String, f64)>,
    seen: BTreeSet<(String, String)>,
}

/// A whole exposition: families in the order declared, each written once.
#[derive(Clone, Debug, Default)]
pub struct Exposition {
    order: Vec<String>,
    families: BTreeMap<String, Family>,
}

impl Exposition {
    pub fn new() -> Self {
        Self::default()
    }

    /// Declare a family (again: nothing changes, as long as the type agrees).
    pub fn declare(&mut self, name: &str, kind: Kind, help: &str) -> Result<(), WriteError> {
        check_name(name)?;
        if kind == Kind::Counter && !name.ends_with("_total") {
            return Err(WriteError::BadName(format!(
                "{name} (a counter ends in _total)"
            )));
        }
        if let Some(f) = self.families.get(name) {
            if f.kind != kind {
                return Err(WriteError::KindClash {
                    name: name.into(),
                    first: f.kind.as_str(),
                    second: kind.as_str(),
                });
            }
            return Ok(());
        }
        self.order.push(name.into());
        self.families.insert(
            name.into(),
            Family {
                help: help.into(),
                kind,
                samples: Vec::new(),
                seen: BTreeSet::new(),
            },
        );
        Ok(())
    }

    /// One sample of a gauge or counter.
    pub fn sample(&mut self, name: &str, labels: &Labels, value: f64) -> Result<(), WriteError> {
        self.push(name, name, labels, value)
    }

    /// A summary's samples: each quantile (`0.5` → value), then `_sum` and `_count`.
    pub fn summary(
        &mut self,
        name: &str,
        labels: &Labels,
        quantiles: &[(f64, f64)],
        sum: f64,
        count: u64,
    ) -> Result<(), WriteError> {
        for &(q, v) in quantiles {
            let mut with_q = labels.clone();
            with_q.push(("quantile".into(), format_value(q)));
            self.push(name, name, &with_q, v)?;
        }
        self.push(name, &format!("{name}_sum"), labels, sum)?;
        self.push(name, &format!("{name}_count"), labels, count as f64)
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.families.values().all(|f| f.samples.is_empty())
    }

    /// The number of samples (lines that are not comments).
    pub fn len(&self) -> usize {
        self.families.values().map(|f| f.samples.len()).sum()
    }

    fn push(
        &mut self,
        family: &str,
        sample: &str,
        labels: &Labels,
        value: f64,
    ) -> Result<(), WriteError> {
        let f = self
            .families
            .get_mut(family)
            .ok_or_else(|| WriteError::Undeclared(family.into()))?;
        let mut names = BTreeSet::new();
        for (k, _) in labels {
            check_label(k)?;
            if !names.insert(k.as_str()) {
                return Err(WriteError::BadLabel(format!("{k} (given twice)")));
            }
        }
        let rendered = render_labels(labels);
        // The same labels in another order are the same series.
        let mut key: Vec<&(String, String)> = labels.iter().collect();
        key.sort();
        let key = format!("{sample}{}", render_labels_ref(&key));
        if !f.seen.insert((sample.to_string(), key.clone())) {
            return Err(WriteError::Duplicate(key));
        }
        f.samples.push((sample.into(), rendered, value));
        Ok(())
    }

    /// The text: per family `# HELP`, `# TYPE`, then its samples; families without a
    /// sample are left out (promtool warns of a family without samples only in lint, but
    /// an empty family says nothing).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for name in &self.order {
            let f = &self.families[name];
            if f.samples.is_empty() {
                continue;
            }
            let _ = writeln!(out, "# HELP {name} {}", escape_help(&f.help));
            let _ = writeln!(out, "# TYPE {name} {}", f.kind.as_str());
            for (sample, labels, value) in &f.samples {
                let _ = writeln!(out, "{sample}{labels} {}", format_value(*value));
            }
        }
        out
    }
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn check_name(name: &str) -> Result<(), WriteError> {
    let ok = !name.is_empty()
        && name.chars().enumerate().all(|(i, c)| {
            c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit())
        });
    if ok {
        Ok(())
    } else {
        Err(WriteError::BadName(name.into()))
    }
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved for Prometheus itself).
fn check_label(name: &str) -> Result<(), WriteError> {
    let ok = !name.is_empty()
        && !name.starts_with("__")
        && name
            .chars()
            .enumerate()
            .all(|(i, c)| c.is_ascii_alphabetic() || c == '_' || (i > 0 && c.is_ascii_digit()));
    if ok {
        Ok(())
    } else {
        Err(WriteError::BadLabel(name.into()))
    }
}

fn render_labels(labels: &Labels) -> String {
    render_labels_ref(&labels.iter().collect::<Vec<_>>())
}

fn render_labels_ref(labels: &[&(String, String)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label_value(v)))
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// A label value: `\` → `\\`, `"` → `\"`, line feed → `\n`.
pub fn escape_label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A help text: `\` → `\\`, line feed → `\n` (quotes stay as they are).
pub fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A sample value as Go's ParseFloat reads it: `NaN`, `+Inf`, `-Inf`, integers without a
/// fraction, otherwise Rust's shortest round-trip form (exponents as `1e-9`).
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else if v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_is_written_once_with_help_and_type() {
        let mut e = Exposition::new();
        e.declare(
            "tame_x_seconds",
            Kind::Gauge,
            "The x.\nSecond line \\ here.",
        )
        .unwrap();
        e.sample("tame_x_seconds", &labels(&[("cpu", "1")]), 0.5)
            .unwrap();
        e.declare("tame_x_seconds", Kind::Gauge, "ignored").unwrap();
        e.sample("tame_x_seconds", &labels(&[("cpu", "2")]), 2.0)
            .unwrap();
        assert_eq!(
            e.render(),
            "# HELP tame_x_seconds The x.\\nSecond line \\\\ here.\n# TYPE tame_x_seconds gauge\ntame_x_seconds{cpu=\"1\"} 0.5\ntame_x_seconds{cpu=\"2\"} 2\n"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let mut e = Exposition::new();
        e.declare("tame_y", Kind::Gauge, "y").unwrap();
        e.sample("tame_y", &labels(&[("source", "a\\b\"c\nd")]), 1.0)
            .unwrap();
        assert!(
            e.render()
                .contains("tame_y{source=\"a\\\\b\\\"c\\nd\"} 1\n"),
            "{}",
            e.render()
        );
    }

    #[test]
    fn a_summary_has_quantiles_sum_and_count() {
        let mut e = Exposition::new();
        e.declare("tame_l_seconds", Kind::Summary, "l").unwrap();
        e.summary(
            "tame_l_seconds",
            &labels(&[("cpu", "0")]),
            &[(0.5, 1e-6), (0.99999, 2.5e-5)],
            0.125,
            1000,
        )
        .unwrap();
        assert_eq!(
            e.render(),
            "# HELP tame_l_seconds l\n# TYPE tame_l_seconds summary\ntame_l_seconds{cpu=\"0\",quantile=\"0.5\"} 0.000001\ntame_l_seconds{cpu=\"0\",quantile=\"0.99999\"} 0.000025\ntame_l_seconds_sum{cpu=\"0\"} 0.125\ntame_l_seconds_count{cpu=\"0\"} 1000\n"
        );
    }

    #[test]
    fn bad_names_duplicates_and_clashes_are_refused() {
        let mut e = Exposition::new();
        assert!(matches!(
            e.declare("1tame", Kind::Gauge, ""),
            Err(WriteError::BadName(_))
        ));
        assert!(matches!(
            e.declare("tame-x", Kind::Gauge, ""),
            Err(WriteError::BadName(_))
        ));
        assert!(matches!(
            e.declare("tame_misses", Kind::Counter, ""),
            Err(WriteError::BadName(_))
        ));
        e.declare("tame_z", Kind::Gauge, "z").unwrap();
        assert!(matches!(
            e.declare("tame_z", Kind::Summary, ""),
            Err(WriteError::KindClash { .. })
        ));
        assert!(matches!(
            e.sample("tame_z", &labels(&[("__name", "1")]), 1.0),
            Err(WriteError::BadLabel(_))
        ));
        assert!(matches!(
            e.sample("tame_z", &labels(&[("a b", "1")]), 1.0),
            Err(WriteError::BadLabel(_))
        ));
        e.sample("tame_z", &labels(&[("a", "1"), ("b", "2")]), 1.0)
            .unwrap();
        assert!(matches!(
            e.sample("tame_z", &labels(&[("b", "2"), ("a", "1")]), 3.0),
            Err(WriteError::Duplicate(_))
        ));
        assert!(matches!(
            e.sample("tame_w", &Labels::new(), 1.0),
            Err(WriteError::Undeclared(_))
        ));
    }

    #[test]
    fn values_read_back_as_go_parses_them() {
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_value(3.0), "3");
        assert_eq!(format_value(-0.25), "-0.25");
        assert_eq!(format_value(1e-9), "0.000000001");
        assert_eq!(format_value(1.5e20), "150000000000000000000");
        for v in [1e-9, 0.1 + 0.2, 123456.789, 2.5e-12] {
            assert_eq!(format_value(v).parse::<f64>().unwrap(), v);
        }
    }

    #[test]
    fn empty_families_are_left_out() {
        let mut e = Exposition::new();
        e.declare("tame_empty", Kind::Gauge, "nothing").unwrap();
        assert!(e.is_empty());
        assert_eq!(e.render(), "");
    }
}
