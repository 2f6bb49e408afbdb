//! `tame compare --json`: its rows as a table, the ratios as bars, the key ratios in the
//! summary.

use crate::error::Result;
use crate::input::CompareDoc;
use crate::model::Context;
use crate::page::{Block, Cell, Page, Section, Table};
use crate::plot::ratios;

/// The figures that make the summary's key ratios.
const KEY: [&str; 4] = [" p50", " p99", " p99_9", " max"];

/// A figure of the comparison: a time (unit `ns`, `ps`, `cycles`) as the bench tables print
/// it, anything else to a few digits, why a percentile is not there, or `—`.
fn value(stat: &str, v: Option<f64>, unit: &str, needs_samples: Option<u64>) -> Cell {
    match (v, needs_samples) {
        (None, Some(n)) => Cell::stat(stat, tame_bench::stats::needs_text(n)),
        (None, None) => Cell::stat(stat, "—"),
        (Some(x), _) if TIME_UNITS.contains(&unit) => {
            Cell::signed_time(stat, unit, x.round() as i64)
        }
        (Some(x), _) => Cell::figure(stat, x),
    }
}

/// The units of the rows that are times.
const TIME_UNITS: [&str; 3] = ["ns", "ps", "cycles"];

pub fn add(page: &mut Page, file: &str, c: &CompareDoc) -> Result<()> {
    let row = |r: &crate::input::CompareRow| {
        vec![
            Cell::text(format!("{} {}", r.group, r.name)),
            Cell::stat("unit", r.unit.clone()),
            value("a", r.a, &r.unit, r.needs_samples),
            value("b", r.b, &r.unit, r.needs_samples),
            value("diff", r.diff, &r.unit, None),
            value("ratio", r.ratio, "", None),
            Cell::stat(
                "beyond_spread",
                match r.beyond_spread {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "—",
                },
            ),
        ]
    };
    let head: Vec<String> = [
        "figure",
        "unit",
        "A",
        "B",
        "B − A",
        "B / A",
        "beyond the spread",
    ]
    .map(String::from)
    .to_vec();
    let key_group = if c.rows.iter().any(|r| r.group == "all") {
        "all"
    } else {
        c.rows.first().map_or("", |r| r.group.as_str())
    };
    let key: Vec<Vec<Cell>> = c
        .rows
        .iter()
        .filter(|r| r.group == key_group && KEY.iter().any(|k| r.name.ends_with(k)))
        .map(row)
        .collect();
    if !key.is_empty() {
        page.key_figures.push(Table {
            id: "compare-key-figures".into(),
            caption: format!(
                "{} results compared: key figures of {key_group} (A = {}, B = {})",
                c.bench, c.a, c.b
            ),
            head: head.clone(),
            rows: key,
        });
    }
    let context = Context {
        label: "comparison".into(),
        file: file.into(),
        environment: format!(
            "not recorded in a comparison — `tame report {} {}` draws the two results with their environments",
            c.a, c.b
        ),
        command: format!("tame compare {} {} (the comparison does not record its own command line)", c.a, c.b),
    };
    let mut blocks = Vec::new();
    for n in &c.notes {
        blocks.push(Block::Text(n.clone()));
    }
    let bars: Vec<(String, f64)> = c
        .rows
        .iter()
        .filter_map(|r| Some((format!("{} {}", r.group, r.name), r.ratio?)))
        .collect();
    if let Some(f) = ratios::figure(
        "compare-ratios",
        &format!("{}: B / A per figure", c.bench),
        &bars,
        "B / A (log; 1 = equal)",
        format!(
            "Each figure of B ({}) over the same figure of A ({}), on a log axis: bars to the right are larger in B, to the left smaller; ×2 and ×0.5 are the same length. Figures without a ratio (0 in A, or in one result only) are in the table.",
            c.b, c.a
        ),
        vec![context],
    )? {
        blocks.push(Block::Figure(Box::new(f)));
    }
    blocks.push(Block::Table(Table {
        id: "compare-rows".into(),
        caption: format!("every row of the comparison (A = {}, B = {})", c.a, c.b),
        head,
        rows: c.rows.iter().map(row).collect(),
    }));
    page.sections.push(Section {
        id: "compare".into(),
        heading: format!("compare: {} results, {} against {}", c.bench, c.b, c.a),
        blocks,
    });
    Ok(())
}
