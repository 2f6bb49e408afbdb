//! stress-ng's own figures, read from the YAML file its `--yaml FILE` writes (with
//! `--metrics-brief`): per stressor the bogo operations and their rate over wall-clock time.
//!
//! A small strict reader rather than a YAML crate: stress-ng writes one fixed, flat layout
//! (a `---` line, top-level sections, the `metrics:` list of `- stressor: NAME` items each
//! followed by `key: value` lines, a `...` line), and what tame reads from it is two keys.
//! The maintained YAML crates are large for that (serde_yaml is archived). Strict means a
//! file that does not have that shape — truncated, garbled, a rate that is no number — is
//! refused with the line that is wrong, never half read.

use std::fmt;

/// One stressor's entry in the `metrics:` list.
#[derive(Clone, Debug, PartialEq)]
pub struct StressorMetrics {
    pub stressor: String,
    /// `bogo-ops`: operations done by all instances over the run.
    pub bogo_ops: Option<f64>,
    /// `bogo-ops-per-second-real-time`: `bogo-ops` over the run's wall-clock time — the
    /// throughput stress-ng prints as `bogo ops/s (real time)`. May be NaN when stress-ng
    /// could not tell (it writes `nan`); readers decide what that means for them.
    pub bogo_ops_per_s: Option<f64>,
    /// `wall-clock-time`: seconds the stressor ran.
    pub wall_clock_s: Option<f64>,
}

/// Why a stress-ng YAML file was refused: the line (1-based, 0 for the file as a whole)
/// and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub what: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.what)
        } else {
            write!(f, "line {}: {}", self.line, self.what)
        }
    }
}

fn error<T>(line: usize, what: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError {
        line,
        what: what.into(),
    })
}

/// Numeric keys tame reads; any other key's value is left unread.
fn number(line: usize, key: &str, value: &str) -> Result<f64, ParseError> {
    value.parse::<f64>().or_else(|_| {
        error(
            line,
            format!("{key} is {value:?}, not a number (stress-ng writes digits, or nan)"),
        )
    })
}

/// `key: value` with a non-empty key of YAML plain-scalar characters.
fn key_value(text: &str) -> Option<(&str, &str)> {
    let (key, value) = text.split_once(':')?;
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    // "key:value" is not a mapping in YAML: a space (or nothing) must follow the colon.
    (plain && (value.is_empty() || value.starts_with(' '))).then(|| (key, value.trim()))
}

/// Parse the whole file. The `metrics:` section must be there and name each stressor once.
pub fn parse(yaml: &str) -> Result<Vec<StressorMetrics>, ParseError> {
    let mut lines = yaml
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end()))
        .filter(|(_, l)| !l.is_empty());
    match lines.next() {
        Some((_, "---")) => {}
        Some((n, _)) => return error(n, "a stress-ng YAML file starts with `---`"),
        None => return error(0, "the file is empty: stress-ng wrote no metrics"),
    }
    let mut section: Option<String> = None;
    let mut metrics: Option<Vec<StressorMetrics>> = None;
    let mut ended = false;
    for (n, line) in lines {
        if ended {
            return error(n, "text after the end of the document (`...`)");
        }
        if line == "..." {
            ended = true;
            continue;
        }
        let indent = line.len() - line.trim_start_matches(' ').len();
        let text = &line[indent..];
        if text.starts_with('\t') {
            return error(n, "a tab in the indentation (YAML indents with spaces)");
        }
        if indent == 0 {
            let Some((key, value)) = key_value(text) else {
                return error(n, format!("{text:?} is not a `key:` line"));
            };
            if !value.is_empty() {
                // A top-level scalar (none in stress-ng's layout so far): not a section.
                section = None;
                continue;
            }
            if key == "metrics" {
                if metrics.is_some() {
                    return error(n, "a second `metrics:` section");
                }
                metrics = Some(Vec::new());
            }
            section = Some(key.to_string());
            continue;
        }
        match (section.as_deref(), metrics.as_mut()) {
            (Some("metrics"), Some(list)) => metrics_line(n, text, list)?,
            (Some(_), _) => {
                // Another section: its lines must still be `key: value` or list items.
                if key_value(text.trim_start_matches("- ")).is_none() {
                    return error(n, format!("{text:?} is not a `key: value` line"));
                }
            }
            _ => return error(n, "an indented line outside any section"),
        }
    }
    let Some(list) = metrics else {
        return error(0, "no `metrics:` section: stress-ng was not run with --metrics-brief --yaml FILE, or stopped before writing it");
    };
    if !ended {
        return error(
            0,
            "the file ends without `...`: stress-ng stopped while writing it",
        );
    }
    Ok(list)
}

/// One line of the `metrics:` list: a new item, or a key of the current one.
fn metrics_line(n: usize, text: &str, list: &mut Vec<StressorMetrics>) -> Result<(), ParseError> {
    if let Some(item) = text.strip_prefix("- ") {
        let Some(("stressor", name)) = key_value(item) else {
            return error(n, "each metrics item starts with `- stressor: NAME`");
        };
        if name.is_empty() {
            return error(n, "a stressor without a name");
        }
        if list.iter().any(|m| m.stressor == name) {
            return error(n, format!("stressor {name} is listed twice"));
        }
        list.push(StressorMetrics {
            stressor: name.to_string(),
            bogo_ops: None,
            bogo_ops_per_s: None,
            wall_clock_s: None,
        });
        return Ok(());
    }
    let Some((key, value)) = key_value(text) else {
        return error(n, format!("{text:?} is not a `key: value` line"));
    };
    let Some(current) = list.last_mut() else {
        return error(n, "a metrics key before the first `- stressor:` item");
    };
    let slot = match key {
        "bogo-ops" => &mut current.bogo_ops,
        "bogo-ops-per-second-real-time" => &mut current.bogo_ops_per_s,
        "wall-clock-time" => &mut current.wall_clock_s,
        _ => return Ok(()),
    };
    if slot.is_some() {
        return error(n, format!("{key} given twice for {}", current.stressor));
    }
    *slot = Some(number(n, key, value)?);
    Ok(())
}

/// The throughput of `stressor` (bogo-ops/s over wall-clock time), refused unless the file
/// names it with a finite, non-negative rate.
pub fn throughput_of(yaml: &str, stressor: &str) -> Result<f64, ParseError> {
    let list = parse(yaml)?;
    let Some(m) = list.iter().find(|m| m.stressor == stressor) else {
        let named: Vec<&str> = list.iter().map(|m| m.stressor.as_str()).collect();
        return error(
            0,
            format!("stress-ng reported no metrics for {stressor} (it reported {named:?})"),
        );
    };
    match m.bogo_ops_per_s {
        Some(rate) if rate.is_finite() && rate >= 0.0 => Ok(rate),
        Some(rate) => error(
            0,
            format!("stress-ng reported {rate} bogo-ops/s for {stressor}: no usable throughput"),
        ),
        None => error(
            0,
            format!("stress-ng reported no bogo-ops-per-second-real-time for {stressor}"),
        ),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    const RECORDED: &str = include_str!("../testdata/stress-ng/hdd-2-instances.yaml");

    #[test]
    fn reads_a_recorded_file() {
        let list = parse(RECORDED).unwrap();
        assert_eq!(list.len(), 1);
        let hdd = &list[0];
        assert_eq!(hdd.stressor, "hdd");
        assert_eq!(hdd.bogo_ops, Some(23296.0));
        assert_eq!(hdd.bogo_ops_per_s, Some(22597.701361));
        assert_eq!(hdd.wall_clock_s, Some(1.030901));
        assert_eq!(throughput_of(RECORDED, "hdd").unwrap(), 22597.701361);
        let e = throughput_of(RECORDED, "cpu").unwrap_err();
        assert_eq!(
            e.to_string(),
            "stress-ng reported no metrics for cpu (it reported [\"hdd\"])"
        );
    }

    /// The printed `metrc:` line of the same run says the same (rounded to 2 decimals).
    #[test]
    fn the_recorded_file_agrees_with_what_stress_ng_printed() {
        let log = include_str!("../testdata/stress-ng/hdd-2-instances.log");
        let printed = printed_rate(log, "hdd").expect("the log has the hdd metrics line");
        let read = throughput_of(RECORDED, "hdd").unwrap();
        assert_eq!(format!("{read:.2}"), printed);
    }

    /// The `bogo ops/s (real time)` column of stress-ng's printed metrics for `stressor`.
    pub(crate) fn printed_rate(log: &str, stressor: &str) -> Option<String> {
        log.lines().find_map(|l| {
            let (_, rest) = l.split_once("] ")?;
            let cols: Vec<&str> = rest.split_whitespace().collect();
            // stressor, bogo ops, real, usr, sys, ops/s real, ops/s usr+sys
            (cols.len() == 7 && cols[0] == stressor && cols[1].parse::<u64>().is_ok())
                .then(|| cols[5].to_string())
        })
    }

    fn with_metrics(body: &str) -> String {
        format!("---\nsystem-info:\n      hostname: vm\n      version: '#1 SMP PREEMPT_DYNAMIC @0'\n\nmetrics:\n{body}\n...\n")
    }

    #[test]
    fn nan_is_read_and_refused_as_a_throughput() {
        let yaml = with_metrics("    - stressor: vm\n      bogo-ops-per-second-real-time: nan");
        assert!(parse(&yaml).unwrap()[0].bogo_ops_per_s.unwrap().is_nan());
        let e = throughput_of(&yaml, "vm").unwrap_err();
        assert!(e.to_string().contains("NaN bogo-ops/s for vm"), "{e}");
    }

    #[test]
    fn garbled_files_are_refused_with_the_line() {
        let cases: &[(&str, &str)] = &[
            ("", "the file is empty"),
            (
                "metrics:\n",
                "line 1: a stress-ng YAML file starts with `---`",
            ),
            (
                "---\nsystem-info:\n      cpus: 2\n...\n",
                "no `metrics:` section",
            ),
            (
                &with_metrics("    - stressor: cpu\n      bogo-ops-per-second-real-time: 12x"),
                "line 8: bogo-ops-per-second-real-time is \"12x\", not a number",
            ),
            (
                &with_metrics("    - stressor: cpu\n      this line is garbage"),
                "line 8: \"this line is garbage\" is not a `key: value` line",
            ),
            (
                &with_metrics("      bogo-ops: 3"),
                "line 7: a metrics key before the first `- stressor:` item",
            ),
            (
                &with_metrics("    - stressor: cpu\n    - stressor: cpu"),
                "line 8: stressor cpu is listed twice",
            ),
            (
                &with_metrics("    - bogo-ops: 3"),
                "line 7: each metrics item starts with `- stressor: NAME`",
            ),
            (
                &with_metrics("    - stressor: cpu\n      bogo-ops: 1\n      bogo-ops: 2"),
                "line 9: bogo-ops given twice for cpu",
            ),
            (
                "---\nmetrics:\n    - stressor: cpu\n      bogo-ops-per-second-real-time: 1",
                "the file ends without `...`",
            ),
            (
                &format!("{}more\n", with_metrics("    - stressor: cpu")),
                "text after the end of the document",
            ),
            (
                "---\n  indented: 1\n...\n",
                "line 2: an indented line outside any section",
            ),
            (
                "---\nmetrics:\n\t- stressor: cpu\n...\n",
                "line 3: a tab in the indentation",
            ),
        ];
        for (yaml, expected) in cases {
            let e = parse(yaml).unwrap_err().to_string();
            assert!(e.contains(expected), "{yaml:?}: {e}");
        }
    }

    proptest! {
        /// Any text at all is read or refused, never a panic; and a refusal names a line
        /// of the text (or the file, 0).
        #[test]
        fn hostile_text_never_panics(text in "\\PC*", cut in 0usize..2000) {
            let lines = text.lines().count();
            if let Err(e) = parse(&text) {
                prop_assert!(e.line <= lines);
            }
            // The recorded file cut anywhere (a stress-ng killed while writing it).
            let mut end = cut.min(RECORDED.len());
            while !RECORDED.is_char_boundary(end) {
                end -= 1;
            }
            let _ = parse(&RECORDED[..end]);
            let _ = throughput_of(&format!("{}{text}", &RECORDED[..end]), "hdd");
        }
    }
}
