//! The page before it becomes HTML: the summary at the top (verdict, key figures,
//! warnings, what the inputs lack), then a section per bench or document with its figures,
//! tables and notes.

use tame_bench::Summary;
use tame_rt::duration::{figure, format_ns_as, NsStyle};

use crate::plot::Figure;

#[derive(Clone, Debug, Default)]
pub struct Page {
    pub title: String,
    /// The inputs, as named.
    pub inputs: Vec<String>,
    /// An assess report's verdict, first on the page.
    pub verdict: Option<Verdict>,
    /// The id of the key figure, drawn at the top (after the verdict's headline, before any
    /// table): the first module to name one that is drawn, else [`Page::choose_lead`]'s pick.
    pub lead: Option<String>,
    /// Key figures per configuration and their ratios.
    pub key_figures: Vec<Table>,
    /// Everything a result warns of (hypervisor, RT throttling, missed periods, …), each fact
    /// once (see [`Page::warn`]).
    pub warnings: Vec<Warning>,
    /// The configurations drawn (their labels): what "every result" of a warning means.
    pub subjects: Vec<String>,
    /// What an input lacks and why (older results), and what was not drawn.
    pub notes: Vec<String>,
    pub sections: Vec<Section>,
}

/// An assess report's decision, as it states it.
#[derive(Clone, Debug, Default)]
pub struct Verdict {
    /// `real_fast_is_enough`, `partition_needed`, `not_met`, `inconclusive`, `unknown`.
    pub outcome: String,
    pub headline: String,
    pub table: Option<Table>,
    pub limits: Vec<String>,
    pub next_step: String,
    pub cost: Option<String>,
    pub notes: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct Section {
    pub id: String,
    pub heading: String,
    pub blocks: Vec<Block>,
}

#[derive(Clone, Debug)]
pub enum Block {
    Figure(Box<Figure>),
    Table(Table),
    /// Something the reader must know about what is (not) drawn.
    Note(String),
    /// A plain paragraph.
    Text(String),
}

#[derive(Clone, Debug, Default)]
pub struct Table {
    pub id: String,
    pub caption: String,
    pub head: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

/// A table cell; `stat` names the figure (`p99`) so tests and scripts can find it. A cell
/// of a measured value shows it as a person reads it (`14.69ms`, `91.0 %`) and keeps the
/// value as the JSON holds it in `value` (with its `unit`): the page's `data-value` and
/// `data-unit`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cell {
    pub text: String,
    pub stat: Option<String>,
    pub value: Option<String>,
    pub unit: Option<String>,
}

impl Cell {
    pub fn text(t: impl Into<String>) -> Cell {
        Cell {
            text: t.into(),
            ..Cell::default()
        }
    }

    pub fn stat(stat: &str, t: impl Into<String>) -> Cell {
        Cell {
            text: t.into(),
            stat: Some(stat.to_string()),
            ..Cell::default()
        }
    }

    /// `stat`'s `text`, with the value it shows as the JSON holds it.
    fn raw(stat: &str, text: String, value: String, unit: &str) -> Cell {
        Cell {
            value: Some(value),
            unit: Some(unit.to_string()),
            ..Cell::stat(stat, text)
        }
    }

    /// A time of `unit` (`ns`, `ps`, `cycles`) as the terminal tables show it.
    pub fn time(stat: &str, unit: &str, v: u64) -> Cell {
        Cell::raw(stat, time_text(unit, v), v.to_string(), unit)
    }

    /// A time of `unit` that may be negative (a margin, a difference).
    pub fn signed_time(stat: &str, unit: &str, v: i64) -> Cell {
        let text = match u64::try_from(v) {
            Ok(v) => time_text(unit, v),
            Err(_) => format!("-{}", time_text(unit, v.unsigned_abs())),
        };
        Cell::raw(stat, text, v.to_string(), unit)
    }

    /// A percentile of `s`: its time, or what it needs where the count cannot support it.
    pub fn percentile(stat: &str, s: &Summary, unit: &str, q: f64, v: u64) -> Cell {
        Cell {
            text: s.percentile_text(q, v, |v| time_text(unit, v)),
            ..Cell::time(stat, unit, v)
        }
    }

    /// A percentage (`91 %`, `14.2 %`, `0.282 %`).
    pub fn percent(stat: &str, v: f64) -> Cell {
        Cell::raw(stat, percent_text(v), format!("{v}"), "%")
    }

    /// A share as a percentage (`14.0 %`), the value kept as the fraction it is (`0.1404`).
    pub fn share(stat: &str, fraction: f64) -> Cell {
        Cell {
            value: Some(format!("{fraction}")),
            unit: Some("fraction".into()),
            ..Cell::percent(stat, fraction * 100.0)
        }
    }

    /// A dimensionless figure (a ratio, a rate) to a few digits: `2.77`, `1453`.
    pub fn figure(stat: &str, v: f64) -> Cell {
        Cell::raw(stat, figure(v), format!("{v}"), "")
    }
}

/// A percentage to three significant digits at most, trailing zeros dropped: `91 %`,
/// `14.2 %`, `0.282 %`, `0.0004 %`.
pub fn percent_text(v: f64) -> String {
    let a = v.abs();
    let digits = if (0.001..1.0).contains(&a) {
        let text = format!("{v:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        figure(v)
    };
    format!("{digits} %")
}

/// A value of `unit` for a table: ns as the bench tables print them (`850ns`, `15.23µs`,
/// `3.401ms`), ps as ns with two decimals below a microsecond (mem's `1.33ns`), cycles
/// and anything else with its unit.
pub fn time_text(unit: &str, v: u64) -> String {
    match unit {
        "ns" => format_ns_as(v, NsStyle::Fixed),
        "ps" if v < 1_000_000 => format!("{:.2}ns", v as f64 / 1000.0),
        "ps" => format_ns_as((v + 500) / 1000, NsStyle::Fixed),
        _ => format!("{v} {unit}"),
    }
}

/// One fact a result warns of, with the results it holds for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Warning {
    /// What makes two warnings one fact: its text, or a name where one fact is worded in two
    /// places (`rt_throttling`: the check's finding and a result's environment).
    pub key: String,
    pub text: String,
    /// The results it holds for, as (label, file); an empty label for the file as a whole.
    pub about: Vec<(String, String)>,
}

impl Page {
    /// Warn of `text` about the result labelled `label` in `file` (an empty label: the file
    /// as a whole). A fact already on the page (the same `key`) is not said again: the result
    /// joins those it holds for.
    pub fn warn(&mut self, label: &str, file: &str, key: Option<&str>, text: String) {
        let key = key.map_or_else(|| text.clone(), str::to_string);
        let about = (label.to_string(), file.to_string());
        match self.warnings.iter_mut().find(|w| w.key == key) {
            Some(w) if w.about.contains(&about) => {}
            Some(w) => w.about.push(about),
            None => self.warnings.push(Warning {
                key,
                text,
                about: vec![about],
            }),
        }
    }

    /// Each warning as one line: its text, after the results it holds for where that tells
    /// anything (not where it holds for every result on the page, or the page has one).
    pub fn warning_lines(&self) -> Vec<String> {
        let many_files = self.inputs.len() > 1;
        self.warnings
            .iter()
            .map(|w| {
                let every = self.subjects.len() > 1
                    && self
                        .subjects
                        .iter()
                        .all(|s| w.about.iter().any(|(l, _)| l == s));
                let whom: Vec<String> = w
                    .about
                    .iter()
                    .filter(|(label, _)| !label.is_empty() || many_files)
                    .map(|(label, file)| match (label.is_empty(), many_files) {
                        (true, _) => file.clone(),
                        (false, true) => format!("{label} ({file})"),
                        (false, false) => label.clone(),
                    })
                    .collect();
                if every || whom.is_empty() || (self.subjects.len() <= 1 && !many_files) {
                    w.text.clone()
                } else {
                    format!("{}: {}", whom.join(", "), w.text)
                }
            })
            .collect()
    }

    /// The key figure where no module named one: the first tail curve (how the
    /// configurations' distributions compare), else the first figure.
    pub fn choose_lead(&mut self) {
        let named = self.lead.as_deref();
        if named.is_some_and(|id| self.figures().any(|f| f.id == id)) {
            return;
        }
        let first_tail = self.figures().find(|f| f.kind == "tail");
        self.lead = first_tail
            .or_else(|| self.figures().next())
            .map(|f| f.id.clone());
    }

    /// The key figure, where there is one.
    pub fn lead_figure(&self) -> Option<&Figure> {
        let id = self.lead.as_deref()?;
        self.figures().find(|f| f.id == id)
    }

    /// Every figure on the page, in order.
    pub fn figures(&self) -> impl Iterator<Item = &Figure> {
        self.sections.iter().flat_map(|s| {
            s.blocks.iter().filter_map(|b| match b {
                Block::Figure(f) => Some(f.as_ref()),
                _ => None,
            })
        })
    }
}

/// A ratio for a table: three significant digits, `—` where the base is 0.
pub fn ratio(b: f64, a: f64) -> String {
    if a == 0.0 || !a.is_finite() || !b.is_finite() {
        return "—".into();
    }
    let r = b / a;
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_and_times_read_with_sensible_digits() {
        assert_eq!(percent_text(91.010489091768), "91 %");
        assert_eq!(percent_text(14.0432), "14 %");
        assert_eq!(percent_text(0.4971219), "0.497 %");
        assert_eq!(percent_text(0.0), "0 %");
        assert_eq!(time_text("ns", 14_688_255), "14.688ms");
        assert_eq!(time_text("ns", 54_941_350), "54.941ms");
        assert_eq!(time_text("ps", 1_330), "1.33ns");
        assert_eq!(time_text("ps", 20_000_000), "20.00µs");
        assert_eq!(
            Cell::signed_time("margin_ns", "ns", -27_101_653).text,
            "-27.102ms"
        );
    }
}
