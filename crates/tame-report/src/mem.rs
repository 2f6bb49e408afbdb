//! Sections for `tame bench mem` results: access time against buffer size (p50 and p99.9
//! of the chase and the stream, both axes logarithmic), then for each pattern the
//! distribution of every size overlaid (histogram and tail curve).

use tame_bench::mem::sweep::human_size;
use tame_bench::GroupResult;

use crate::bench::distribution_figures;
use crate::error::Result;
use crate::model::{Config, Context, Series};
use crate::page::{Block, Page, Section};
use crate::plot::lines::{self, Axes, Line};
use crate::summary;

const PATTERNS: [(&str, &str); 2] = [
    ("chase", "dependent loads in a random cycle (latency)"),
    ("stream", "sequential loads (bandwidth per line)"),
];

/// A group's pattern, buffer size (bytes) and `access` series, if it is a mem group.
fn parse(config: &Config, many: bool, g: &GroupResult) -> Option<(String, u64, Series)> {
    let (pattern, _) = g.label.split_once(' ')?;
    let bytes = *g.counters.get("buffer_bytes")?;
    let m = g.metric("access")?;
    let size = human_size(bytes);
    let label = if many {
        format!("{}: {size}", config.label)
    } else {
        size
    };
    Some((pattern.to_string(), bytes, Series::of_metric(label, m)))
}

/// A tick of log2(bytes): the size it stands for.
fn size_tick(v: f64) -> String {
    human_size(2f64.powf(v).round() as u64)
}

/// A tick of log10(ns): the time it stands for, in ns.
fn ns_tick(v: f64) -> String {
    crate::plot::tick(10f64.powf(v))
}

pub fn add(page: &mut Page, configs: &[Config], prefix: &str) -> Result<()> {
    let ctx: Vec<Context> = configs.iter().map(Config::context).collect();
    let many = configs.len() > 1;
    let mut blocks = Vec::new();
    let mut lines_drawn: Vec<Line> = Vec::new();
    let mut per_pattern: Vec<Vec<Series>> = vec![Vec::new(); PATTERNS.len()];
    for c in configs {
        let mut points: Vec<(String, u64, Series)> = c
            .result
            .groups
            .iter()
            .filter_map(|g| parse(c, many, g))
            .collect();
        points.sort_by_key(|p| p.1);
        for (i, (pattern, _)) in PATTERNS.iter().enumerate() {
            let of: Vec<&(String, u64, Series)> =
                points.iter().filter(|p| p.0 == *pattern).collect();
            for (figure, pick) in [("p50", 0), ("p99.9", 1)] {
                let q = if pick == 0 { 0.50 } else { 0.999 };
                let line: Vec<(f64, f64)> = of
                    .iter()
                    .filter(|(_, _, s)| s.summary.supports(q))
                    .map(|(_, bytes, s)| {
                        let ps = if pick == 0 {
                            s.summary.p50
                        } else {
                            s.summary.p99_9
                        };
                        ((*bytes as f64).log2(), (ps.max(1) as f64 / 1000.0).log10())
                    })
                    .collect();
                if !line.is_empty() {
                    let name = format!("{pattern} {figure}");
                    let name = if many {
                        format!("{}: {name}", c.label)
                    } else {
                        name
                    };
                    lines_drawn.push((name, line));
                }
            }
            per_pattern[i].extend(of.into_iter().map(|p| p.2.clone()));
        }
        if let Some(sweep) = c.result.settings.get("sweep").and_then(|v| v.as_str()) {
            blocks.push(Block::Text(format!("{}: sizes {sweep}", c.label)));
        }
    }
    if let Some(f) = lines::figure(
        &format!("{prefix}-sweep"),
        "mem: access time against buffer size",
        Axes {
            kind: "scaling",
            x_label: "buffer size (log scale)",
            y_label: "ns per access (log scale)",
            x_tick: size_tick,
            y_tick: ns_tick,
        },
        &lines_drawn,
        "Time per access (one cache line) against the buffer's size: the chase's steps show each cache level giving way to the next, up to DRAM; p99.9 above p50 is the jitter the paper measured. Both axes are logarithmic.".into(),
        ctx.clone(),
    )? {
        page.lead.get_or_insert_with(|| f.id.clone());
        blocks.insert(0, Block::Figure(Box::new(f)));
    }
    for ((pattern, what), series) in PATTERNS.iter().zip(&per_pattern) {
        if series.is_empty() {
            continue;
        }
        let id = format!("{prefix}-{pattern}");
        let title = format!("mem {pattern}: {what}, time per access by buffer size");
        page.key_figures.push(summary::key_figures(
            &format!("{id}-key-figures"),
            &title,
            series,
        ));
        distribution_figures(&mut blocks, &id, &title, series, &ctx)?;
    }
    page.sections.push(Section {
        id: prefix.to_string(),
        heading: "mem: memory-access time per buffer size".into(),
        blocks,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_name_what_the_logarithms_stand_for() {
        assert_eq!(size_tick(16.0), "64KiB");
        assert_eq!(size_tick(27.0), "128MiB");
        assert_eq!(ns_tick(2.0), "100");
        assert_eq!(ns_tick(0.0), "1");
    }
}
