//! Sections for `tame bench cache` results: the iteration time of each configuration
//! (alone, with the competitor) overlaid as histogram and tail curve, the slowdowns, and
//! what the run had of the L3's ways.

use crate::bench::{distribution_figures, merged_derived_table, slug};
use crate::error::Result;
use crate::model::{Config, Context, Series};
use crate::page::{Block, Page, Section};
use crate::summary;

pub fn add(page: &mut Page, configs: &[Config], prefix: &str) -> Result<()> {
    let ctx: Vec<Context> = configs.iter().map(Config::context).collect();
    let many = configs.len() > 1;
    let mut series = Vec::new();
    let mut blocks = Vec::new();
    for c in configs {
        for g in &c.result.groups {
            let Some(m) = g.metric("iteration") else {
                continue;
            };
            let label = if many {
                format!("{}: {}", c.label, g.label)
            } else {
                g.label.clone()
            };
            series.push(Series::of_metric(label, m));
        }
        let note = c.result.settings["cache_ways"]["note"].as_str();
        if let Some(note) = note {
            blocks.push(Block::Note(format!("{}: resctrl: {note}", c.label)));
        }
        let caption = format!(
            "{}: with the competitor over alone (merged.derived of {})",
            c.label, c.file
        );
        let id = format!("{prefix}-slowdown-{}", slug(&c.label));
        if let Some(t) = merged_derived_table(c, id, caption, "slowdown") {
            blocks.push(Block::Table(t));
        }
    }
    let what = "cache: time per matrix multiply";
    if !series.is_empty() {
        page.key_figures.push(summary::key_figures(
            &format!("{prefix}-key-figures"),
            &format!("{what}: key figures per configuration"),
            &series,
        ));
        if let Some(t) = summary::ratios(
            &format!("{prefix}-ratios"),
            &format!("{what}: ratios to {}", series[0].label),
            &series,
        ) {
            page.key_figures.push(t);
        }
        distribution_figures(&mut blocks, prefix, what, &series, &ctx)?;
    }
    page.sections.push(Section {
        id: prefix.to_string(),
        heading: "cache: a real-time task beside a cache-thrashing competitor".into(),
        blocks,
    });
    Ok(())
}
