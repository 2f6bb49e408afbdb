//! Sections for bench results: the figures each bench calls for, overlaid per
//! configuration, with key figures, warnings and what older results lack.

use tame_bench::Summary;

use crate::error::Result;
use crate::model::{Config, Context, Series};
use crate::page::{Block, Cell, Page, Section, Table};
use crate::plot::attribution::{Bar, NOT_ATTRIBUTED};
use crate::plot::lines::{Axes, Line};
use crate::plot::{attribution, histogram, lines, tail, timeline, Scale};
use crate::summary;

/// The note on a result written before distributions were recorded.
pub const NO_DISTRIBUTION: &str =
    "written before distributions were recorded: rerun with this tame for histograms";
/// The note on a result without a time line.
pub const NO_TIMELINE: &str =
    "written before time lines were recorded: rerun with this tame to see the value over time";

/// Add the sections of results of one bench (`configs` all of it) to the page; `prefix`
/// keeps the figure ids of several such sections apart.
pub fn add(page: &mut Page, configs: &[Config], prefix: &str) -> Result<()> {
    let Some(first) = configs.first() else {
        return Ok(());
    };
    for c in configs {
        page.subjects.push(c.label.clone());
        summary::warn(page, c);
    }
    match first.result.bench.as_str() {
        "ipc" => ipc(page, configs, prefix),
        "noise" => noise(page, configs, prefix),
        "cost" => crate::cost::add(page, configs, prefix),
        "mem" => crate::mem::add(page, configs, prefix),
        "cache" => crate::cache::add(page, configs, prefix),
        "watch" => crate::watch::add(page, configs, prefix),
        _ => timed(page, configs, prefix),
    }
}

fn contexts(configs: &[Config]) -> Vec<Context> {
    configs.iter().map(Config::context).collect()
}

/// What the primary metric is, for headings.
fn describe(bench: &str, metric: &str) -> String {
    match bench {
        "cycle" => format!("cycle: {metric} of periodic wakeups"),
        "sleep" => format!("sleep: {metric} of relative sleeps"),
        "fwq" => format!("fwq: {metric} of a fixed work quantum"),
        "noise" => format!("noise: {metric}s in a busy loop"),
        "job" => format!("job: {metric} of a periodic task running its work"),
        _ => format!("{bench}: {metric}"),
    }
}

/// Notes for series lacking a distribution or a time line.
fn lacks(page: &mut Page, configs: &[Config], series: &[Series], section: &mut Vec<Block>) {
    for (c, s) in configs.iter().zip(series) {
        if s.distribution.is_none() {
            let n = format!(
                "{} ({}): no histogram of {} — {NO_DISTRIBUTION}; its tail curve is drawn from the summary's percentiles (p50 … p99.999, max)",
                c.label, c.file, s.metric
            );
            section.push(Block::Note(n.clone()));
            page.notes.push(n);
        }
    }
    if !series.iter().any(|s| s.timeline.is_some()) {
        let files: Vec<&str> = configs.iter().map(|c| c.file.as_str()).collect();
        let n = format!("{}: {NO_TIMELINE}", files.join(", "));
        section.push(Block::Note(n.clone()));
        page.notes.push(n);
    }
}

/// Everything about one metric over the configurations: what the series lack, the key
/// figures and their ratios to the first (in the summary), and the three figures.
fn metric_figures(
    page: &mut Page,
    configs: &[Config],
    series: &[Series],
    prefix: &str,
    what: &str,
    ctx: &[Context],
    blocks: &mut Vec<Block>,
) -> Result<()> {
    let Some(s0) = series.first() else {
        return Ok(());
    };
    lacks(page, configs, series, blocks);
    page.key_figures.push(summary::key_figures(
        &format!("{prefix}-key-figures"),
        &format!("{what}: key figures (from each result's merged group)"),
        series,
    ));
    if let Some(t) = summary::ratios(
        &format!("{prefix}-ratios"),
        &format!("{what}: ratios to {}", s0.label),
        series,
    ) {
        page.key_figures.push(t);
    }
    distribution_figures(blocks, prefix, what, series, ctx)
}

/// The three figures of a metric: histogram, tail curve, value over time (where kept).
pub(crate) fn distribution_figures(
    blocks: &mut Vec<Block>,
    prefix: &str,
    what: &str,
    series: &[Series],
    ctx: &[Context],
) -> Result<()> {
    if let Some(f) = histogram::figure(
        &format!("{prefix}-histogram"),
        &format!("{what}: histogram"),
        series,
        ctx.to_vec(),
    )? {
        blocks.push(Block::Figure(Box::new(f)));
    }
    if let Some(f) = tail::figure(
        &format!("{prefix}-tail"),
        &format!("{what}: tail curve"),
        series,
        ctx.to_vec(),
    )? {
        blocks.push(Block::Figure(Box::new(f)));
    }
    if let Some(f) = timeline::figure(
        &format!("{prefix}-timeline"),
        &format!("{what} over time"),
        series,
        ctx.to_vec(),
    )? {
        blocks.push(Block::Figure(Box::new(f)));
    }
    Ok(())
}

/// cycle, sleep, fwq: one metric per configuration.
fn timed(page: &mut Page, configs: &[Config], prefix: &str) -> Result<()> {
    let series: Vec<Series> = configs.iter().filter_map(Config::primary_series).collect();
    let Some(s0) = series.first() else {
        page.notes
            .push(format!("{prefix}: the results hold no metric to draw"));
        return Ok(());
    };
    let bench = configs[0].result.bench.clone();
    let what = describe(&bench, &s0.metric);
    let ctx = contexts(configs);
    let mut blocks = Vec::new();
    metric_figures(page, configs, &series, prefix, &what, &ctx, &mut blocks)?;
    if bench == "sleep" {
        if let Some(f) = sleep_scaling(prefix, configs, &series, &ctx)? {
            // Jitter against the number of tasks: what a sweep was run for.
            page.lead.get_or_insert_with(|| f.id.clone());
            blocks.push(Block::Figure(Box::new(f)));
        }
    }
    page.sections.push(Section {
        id: prefix.to_string(),
        heading: what,
        blocks,
    });
    Ok(())
}

/// Sleep jitter (p99 and maximum) against the number of tasks, where the results differ in
/// it: one pair of lines per configuration (partition and load), so a shared and a
/// partitioned sweep are drawn side by side rather than joined into one line.
fn sleep_scaling(
    prefix: &str,
    configs: &[Config],
    series: &[Series],
    ctx: &[Context],
) -> Result<Option<crate::plot::Figure>> {
    let mut points: Vec<(String, u64, Summary)> = configs
        .iter()
        .zip(series)
        .filter_map(|(c, s)| {
            let tasks = c.result.settings.get("tasks")?.as_u64()?;
            Some((scaling_key(&c.result), tasks, s.summary))
        })
        .collect();
    points.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let mut tasks: Vec<u64> = points.iter().map(|p| p.1).collect();
    tasks.sort_unstable();
    tasks.dedup();
    if tasks.len() < 2 {
        return Ok(None);
    }
    let mut keys: Vec<&str> = points.iter().map(|p| p.0.as_str()).collect();
    keys.dedup();
    let max = points.iter().map(|p| p.2.max).max().unwrap_or(1);
    let scale = Scale::for_values(&series[0].unit, max);
    let mut drawn: Vec<Line> = Vec::new();
    for key in &keys {
        for (stat, f, q) in [
            (
                "p99",
                (|s: &Summary| s.p99) as fn(&Summary) -> u64,
                Some(0.99),
            ),
            ("max", |s| s.max, None),
        ] {
            let name = if keys.len() > 1 {
                format!("{key}: {stat}")
            } else {
                stat.to_string()
            };
            let line = points
                .iter()
                .filter(|p| p.0 == *key)
                .filter(|(_, _, s)| q.is_none_or(|q| s.supports(q)))
                .map(|(_, t, s)| (*t as f64, scale.of(f(s))))
                .collect();
            drawn.push((name, line));
        }
    }
    let y_label = format!("{} ({})", series[0].metric, scale.unit);
    lines::figure(
        &format!("{prefix}-tasks"),
        "sleep: jitter against the number of tasks",
        Axes {
            kind: "scaling",
            x_label: "sleeping tasks running at once",
            y_label: &y_label,
            x_tick: crate::plot::tick,
            y_tick: crate::plot::tick,
        },
        &drawn,
        "How the jitter grows as more tasks sleep at once: the p99 and the maximum of each result, one point per result, one pair of lines per configuration.".into(),
        ctx.to_vec(),
    )
}

/// What a sweep's lines are told apart by: where it ran and under which load.
fn scaling_key(r: &tame_bench::BenchResult) -> String {
    let place = r
        .partition
        .as_ref()
        .map_or("shared".to_string(), |p| format!("partition {p}"));
    match &r.load {
        Some(l) => format!(
            "{place}, load {}",
            l.kinds
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(",")
        ),
        None => place,
    }
}

/// noise: attribution per CPU, the gaps' distribution, tail and time line, and a table.
fn noise(page: &mut Page, configs: &[Config], prefix: &str) -> Result<()> {
    let ctx = contexts(configs);
    let mut blocks = Vec::new();
    let mut bars = Vec::new();
    let mut rows = Vec::new();
    for c in configs {
        let Some(n) = &c.noise else {
            let note = format!(
                "{} ({}): a noise result without its `noise` findings: no attribution drawn",
                c.label, c.file
            );
            blocks.push(Block::Note(note.clone()));
            page.notes.push(note);
            continue;
        };
        for cpu in &n.cpus {
            let run = cpu.run_ns.max(1) as f64;
            let mut segments: Vec<(String, f64)> = cpu
                .sources
                .iter()
                .map(|s| {
                    (
                        source_name(s.class.as_str(), &s.source),
                        s.tally.total_ns as f64 * 100.0 / run,
                    )
                })
                .collect();
            let named: u64 = cpu.sources.iter().map(|s| s.tally.total_ns).sum();
            if cpu.noise_ns > named {
                segments.push((
                    NOT_ATTRIBUTED.to_string(),
                    (cpu.noise_ns - named) as f64 * 100.0 / run,
                ));
            }
            let label = if configs.len() > 1 {
                format!("{} cpu{}", c.label, cpu.cpu)
            } else {
                format!("cpu{}", cpu.cpu)
            };
            bars.push(Bar {
                label: label.clone(),
                segments,
            });
            rows.push(vec![
                Cell::text(label),
                Cell::percent("noise_share_percent", cpu.noise_share_percent),
                Cell::time("noise_ns", "ns", cpu.noise_ns),
                Cell::stat("gaps", cpu.gaps.to_string()),
                Cell::stat("gaps_dropped", cpu.gaps_dropped.to_string()),
                Cell::stat("events_lost", cpu.events_lost.to_string()),
                cpu.unexplained_ns.map_or_else(
                    || Cell::stat("unexplained_ns", "—"),
                    |u| Cell::time("unexplained_ns", "ns", u),
                ),
            ]);
        }
    }
    let caption = "Where the busy loop's time went: each bar is one CPU's run, each segment a source's total gap time as a share of it (eight sources by name, each bar's largest in turn, the rest together as `other sources`, mid grey); `unexplained`, black, is what no guest event explains (the hypervisor, SMIs); `not attributed`, pale grey, is gap time no source was charged with (all of it when attribution did not run).".to_string();
    // The key figure of a noise result: where the time went.
    page.lead
        .get_or_insert_with(|| format!("{prefix}-attribution"));
    if let Some(f) = attribution::figure(
        &format!("{prefix}-attribution"),
        "noise: share of the run per source",
        &bars,
        caption,
        ctx.clone(),
    )? {
        blocks.push(Block::Figure(Box::new(f)));
    }
    blocks.push(Block::Table(Table {
        id: format!("{prefix}-cpus"),
        caption: "noise per CPU, as the result holds it".into(),
        head: [
            "CPU",
            "noise share",
            "noise",
            "gaps",
            "gaps not kept",
            "trace events lost",
            "unexplained",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    }));
    let series: Vec<Series> = configs.iter().filter_map(Config::primary_series).collect();
    if let Some(s0) = series.first() {
        let what = describe("noise", &s0.metric);
        metric_figures(page, configs, &series, prefix, &what, &ctx, &mut blocks)?;
    }
    page.sections.push(Section {
        id: prefix.to_string(),
        heading: "noise: what interrupts a busy loop".into(),
        blocks,
    });
    Ok(())
}

/// ipc: per message size, the one-way latency of every transport; the ratios table.
fn ipc(page: &mut Page, configs: &[Config], prefix: &str) -> Result<()> {
    let ctx = contexts(configs);
    let mut blocks = Vec::new();
    // (size, series) in the order the results list them; the transports a run never reached.
    let mut sizes: Vec<(String, Vec<Series>)> = Vec::new();
    let mut unreached: Vec<(String, String)> = Vec::new();
    for c in configs {
        for g in &c.result.groups {
            let (transport, size) = g.label.split_once('/').unwrap_or((g.label.as_str(), "all"));
            let label = if configs.len() > 1 {
                format!("{}: {transport}", c.label)
            } else {
                transport.to_string()
            };
            if g.not_measured.is_some() {
                unreached.push((size.to_string(), label));
                continue;
            }
            let Some(m) = g.metric("one_way_latency") else {
                continue;
            };
            let s = Series {
                label,
                metric: "one-way latency".into(),
                unit: m.unit.clone(),
                summary: m.summary,
                distribution: m.distribution.clone(),
                timeline: None,
                missed: 0,
            };
            match sizes.iter_mut().find(|(sz, _)| sz == size) {
                Some((_, v)) => v.push(s),
                None => sizes.push((size.to_string(), vec![s])),
            }
        }
    }
    for (size, _) in &unreached {
        if !sizes.iter().any(|(s, _)| s == size) {
            sizes.push((size.clone(), Vec::new()));
        }
    }
    let mut lacking = Vec::new();
    for (size, series) in &sizes {
        let id = format!("{prefix}-{}", size.to_ascii_lowercase());
        let what = format!("ipc {size} messages: one-way latency per transport");
        let mut table = summary::key_figures(&format!("{id}-key-figures"), &what, series);
        let columns = table.head.len();
        table.rows.extend(
            unreached
                .iter()
                .filter(|(s, _)| s == size)
                .map(|(_, label)| summary::not_measured_row(label, columns)),
        );
        page.key_figures.push(table);
        if let Some(f) = histogram::figure(
            &format!("{id}-histogram"),
            &format!("{what}: histogram"),
            series,
            ctx.clone(),
        )? {
            blocks.push(Block::Figure(Box::new(f)));
        }
        if let Some(f) = tail::figure(
            &format!("{id}-tail"),
            &format!("{what}: tail curve"),
            series,
            ctx.clone(),
        )? {
            blocks.push(Block::Figure(Box::new(f)));
        }
        lacking.extend(
            series
                .iter()
                .filter(|s| s.distribution.is_none())
                .map(|s| format!("{} ({size})", s.label)),
        );
    }
    if !lacking.is_empty() {
        let n = format!("ipc: no histogram of {} — {NO_DISTRIBUTION}; the tail curves are drawn from the summary's percentiles", lacking.join(", "));
        blocks.push(Block::Note(n.clone()));
        page.notes.push(n);
    }
    for c in configs {
        let caption = format!(
            "{}: the ratios between transports (merged.derived of {})",
            c.label, c.file
        );
        let id = format!("{prefix}-derived-{}", slug(&c.label));
        if let Some(t) = merged_derived_table(c, id, caption, "ratio") {
            blocks.push(Block::Table(t));
        }
    }
    page.sections.push(Section {
        id: prefix.to_string(),
        heading: "ipc: latency of each transport".into(),
        blocks,
    });
    Ok(())
}

/// A result's `merged.derived` figures as a table of name and value (`None` when it has none).
pub(crate) fn merged_derived_table(
    c: &Config,
    id: String,
    caption: String,
    name: &str,
) -> Option<Table> {
    let rows: Vec<Vec<Cell>> = c
        .result
        .merged
        .derived
        .iter()
        .map(|(k, v)| vec![Cell::text(k.clone()), Cell::figure(k, *v)])
        .collect();
    (!rows.is_empty()).then(|| Table {
        id,
        caption,
        head: vec![name.into(), "value".into()],
        rows,
    })
}

/// A source's name for a legend: `irq 36 virtio0`, `tick: local_timer`.
fn source_name(class: &str, source: &str) -> String {
    if source.starts_with(class) {
        source.to_string()
    } else {
        format!("{class}: {source}")
    }
}

/// A label as part of an id: letters, digits and `-`.
pub fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}
