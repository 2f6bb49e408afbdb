//! `tame bench cost` results: per workload the throughput of each configuration (shared,
//! partitioned) with its rounds' range, per CPU, and the cost; the ratios partitioned ÷
//! shared as bars around 1, and each configuration's slowest and fastest round against its
//! mean (the spread a cost must exceed to mean anything).

use tame_bench::cost::figures::{Figures, GEOMEAN};
use tame_bench::GroupResult;

use crate::error::Result;
use crate::model::{Config, Context};
use crate::page::{Block, Cell, Page, Section, Table};
use crate::plot::ratios;

/// A group's workload and configuration: `shared/cpu` → (`shared`, `cpu`).
fn split(g: &GroupResult) -> (&str, &str) {
    g.label.split_once('/').unwrap_or(("", g.label.as_str()))
}

fn named(configs: &[Config], c: &Config, what: &str) -> String {
    if configs.len() > 1 {
        format!("{}: {what}", c.label)
    } else {
        what.to_string()
    }
}

pub fn add(page: &mut Page, configs: &[Config], prefix: &str) -> Result<()> {
    let ctx: Vec<Context> = configs.iter().map(Config::context).collect();
    let mut blocks = Vec::new();
    let mut ratio_rows = Vec::new();
    let mut spread_rows = Vec::new();
    for c in configs {
        let mut rows = Vec::new();
        for g in &c.result.groups {
            let (config, workload) = split(g);
            let Some(f) = Figures::of(g) else { continue };
            let unit = g.metric("throughput").map_or(String::new(), |m| {
                m.unit.trim_start_matches("milli-").to_string()
            });
            let d = |k: &str, cell: fn(&str, f64) -> Cell| {
                g.derived.get(k).map_or(Cell::stat(k, "—"), |v| cell(k, *v))
            };
            let spread = |stat, v: fn(&tame_bench::Spread) -> f64| {
                f.spread
                    .map_or(Cell::stat(stat, "—"), |s| Cell::figure(stat, v(&s)))
            };
            rows.push(vec![
                Cell::text(named(configs, c, &g.label)),
                Cell::text(unit),
                Cell::figure("throughput", f.throughput),
                spread("min", |s| s.min),
                spread("max", |s| s.max),
                Cell::stat("cpus", f.cpus.to_string()),
                Cell::figure("throughput_per_cpu", f.per_cpu),
                d("ratio_to_shared", Cell::figure),
                d("cost_percent", Cell::percent),
                d("cost_per_cpu_percent", Cell::percent),
            ]);
            if let Some(r) = g.derived.get("ratio_to_shared") {
                ratio_rows.push((named(configs, c, workload), *r));
            }
            if let Some(s) = f.spread.filter(|_| f.throughput > 0.0) {
                let label = named(configs, c, &format!("{config} {workload}"));
                spread_rows.push((format!("{label} slowest"), s.min / f.throughput));
                spread_rows.push((format!("{label} fastest"), s.max / f.throughput));
            }
        }
        blocks.push(Block::Table(Table {
            id: format!("{prefix}-{}", crate::bench::slug(&c.label)),
            caption: format!(
                "{}: throughput per workload and configuration, mean over the rounds ({})",
                c.label, c.file
            ),
            head: [
                "configuration/workload",
                "unit",
                "throughput",
                "slowest round",
                "fastest round",
                "CPUs",
                "per CPU",
                "partitioned ÷ shared",
                "cost",
                "cost per CPU",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        }));
        if let Some(g) = c.result.merged.derived.get(GEOMEAN) {
            blocks.push(Block::Text(format!(
                "{}: over all workloads (geometric mean of the ratios) partitioning costs {g:.1} % of the throughput.",
                c.label
            )));
        }
    }
    if ratio_rows.is_empty() {
        let n = format!(
            "{}: no result measured both configurations, so no cost is drawn — run tame bench cost with --spec FILE or --isolate N (or -p NAME beside a shared run)",
            configs.iter().map(|c| c.file.as_str()).collect::<Vec<_>>().join(", ")
        );
        blocks.push(Block::Note(n.clone()));
        page.notes.push(n);
    }
    if let Some(f) = ratios::figure(
        &format!("{prefix}-ratios"),
        "cost: throughput partitioned ÷ shared per workload",
        &ratio_rows,
        "partitioned ÷ shared (log scale)",
        "Each workload's throughput on the system partition while the partition was applied, over its throughput on the machine as it is (means over the rounds): a bar left of 1 is what partitioning costs ordinary work. Half the CPUs and no other cost gives ×0.5 on a machine of two.".into(),
        ctx.clone(),
    )? {
        blocks.push(Block::Figure(Box::new(f)));
    }
    if let Some(f) = ratios::figure(
        &format!("{prefix}-spread"),
        "cost: slowest and fastest round ÷ the mean",
        &spread_rows,
        "round ÷ mean of the rounds (log scale)",
        "How much each workload's throughput varied from round to round in each configuration: a cost smaller than this spread is not told apart from noise.".into(),
        ctx,
    )? {
        blocks.push(Block::Figure(Box::new(f)));
    }
    page.sections.push(Section {
        id: prefix.to_string(),
        heading: "cost: what a partition costs ordinary work".into(),
        blocks,
    });
    Ok(())
}
