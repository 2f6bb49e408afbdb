//! The page before it becomes HTML: the summary at the top (verdict, key figures,
//! warnings, what the inputs lack), then a section per bench or document with its figures,
//! tables and notes.

use crate::plot::Figure;

#[derive(Clone, Debug, Default)]
pub struct Page {
    pub title: String,
    /// The inputs, as named.
    pub inputs: Vec<String>,
    /// An assess report's verdict, first on the page.
    pub verdict: Option<Verdict>,
    /// Key figures per configuration and their ratios.
    pub key_figures: Vec<Table>,
    /// Everything a result warns of (hypervisor, RT throttling, missed periods, …).
    pub warnings: Vec<String>,
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

/// A table cell; `stat` names the figure (`p99`) so tests and scripts can find it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cell {
    pub text: String,
    pub stat: Option<String>,
}

impl Cell {
    pub fn text(t: impl Into<String>) -> Cell {
        Cell {
            text: t.into(),
            stat: None,
        }
    }

    pub fn stat(stat: &str, t: impl Into<String>) -> Cell {
        Cell {
            text: t.into(),
            stat: Some(stat.to_string()),
        }
    }
}

impl Page {
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
