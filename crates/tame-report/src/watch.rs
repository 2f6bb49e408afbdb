//! Sections for watch results: a table of each thread's period, deadline and misses; per
//! thread what delayed it and the snapshots of its misses; then for each of the three
//! figures of an activation (wake latency, response, run time) the threads' key figures,
//! histogram and tail curve overlaid.

use tame_bench::watch::snapshot::priority_words;
use tame_bench::watch::{Snapshot, ThreadFindings, WatchFindings, WatchSettings};
use tame_bench::GroupResult;
use tame_rt::duration::{format_ns_as, NsStyle};

use crate::bench::{distribution_figures, slug};
use crate::error::Result;
use crate::model::{shell_words, Config, Context, Series};
use crate::page::{Block, Cell, Page, Section, Table};
use crate::plot::snapshot;
use crate::summary;

/// The metrics of a watch result, and what each is.
pub const METRICS: [(&str, &str); 3] = [
    (
        "wake_latency",
        "wake latency (from the release to switched in)",
    ),
    (
        "response",
        "response (from the release to the activation's end)",
    ),
    ("run_time", "run time (on a CPU, per activation)"),
];

/// Causes listed per thread, as `tame watch` prints them.
pub const TOP_CAUSES: usize = 6;

pub fn add(page: &mut Page, configs: &[Config], prefix: &str) -> Result<()> {
    let ctx: Vec<Context> = configs.iter().map(Config::context).collect();
    let many = configs.len() > 1;
    let thread_label = |c: &Config, thread: &str| {
        if many {
            format!("{}: {thread}", c.label)
        } else {
            thread.to_string()
        }
    };
    let mut blocks = Vec::new();
    for c in configs {
        blocks.push(Block::Text(watched(c)));
    }
    // The findings first (threads, causes, misses), then the distributions.
    let mut figures = Vec::new();
    for (metric, what) in METRICS {
        let series: Vec<Series> = configs
            .iter()
            .flat_map(|c| {
                c.result.groups.iter().filter_map(move |g: &GroupResult| {
                    let m = g.metric(metric)?;
                    Some(Series::of_metric(thread_label(c, &g.label), m))
                })
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        let id = format!("{prefix}-{}", slug(metric));
        let title = format!("watch: {what}, per thread");
        page.key_figures.push(summary::key_figures(
            &format!("{id}-key-figures"),
            &title,
            &series,
        ));
        distribution_figures(&mut figures, &id, &title, &series, &ctx)?;
    }
    let mut rows = Vec::new();
    let mut per_thread = Vec::new();
    for c in configs {
        let Some(w) = &c.watch else {
            let n = format!(
                "{} ({}): a watch result without its `watch` findings: no periods, causes or snapshots shown",
                c.label, c.file
            );
            per_thread.push(Block::Note(n.clone()));
            page.notes.push(n);
            continue;
        };
        if w.threads.is_empty() {
            per_thread.push(Block::Note(format!(
                "{}: no watched thread ran an activation",
                c.label
            )));
        }
        for t in &w.threads {
            let label = thread_label(c, &t.label);
            rows.push(thread_row(&label, t));
            per_thread.push(Block::Table(causes(prefix, &label, t)));
            for &i in &t.snapshot_ids {
                if let Some(s) = w.snapshots.get(i) {
                    per_thread.push(Block::Figure(Box::new(miss(prefix, c, many, i, s)?)));
                }
            }
        }
        // A snapshot no thread lists (the findings were edited): drawn all the same.
        for (i, s) in w.snapshots.iter().enumerate() {
            if !w.threads.iter().any(|t| t.snapshot_ids.contains(&i)) {
                per_thread.push(Block::Figure(Box::new(miss(prefix, c, many, i, s)?)));
            }
        }
        per_thread.extend(findings_notes(c, w));
    }
    if !rows.is_empty() {
        blocks.push(Block::Table(Table {
            id: format!("{prefix}-threads"),
            caption: "each watched thread: its period (given, or the median distance between releases), the deadline its responses were judged against, and what went wrong".into(),
            head: [
                "thread",
                "thread id",
                "priority",
                "activations",
                "period",
                "period from",
                "deadline",
                "misses",
                "missed periods",
                "page faults",
                "migrations",
                "involuntary switches",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        }));
    }
    blocks.extend(per_thread);
    blocks.extend(figures);
    page.sections.push(Section {
        id: prefix.to_string(),
        heading: "watch: every activation of the watched threads".into(),
        blocks,
    });
    Ok(())
}

/// What was watched and how, in a line.
fn watched(c: &Config) -> String {
    let Ok(s) = serde_json::from_value::<WatchSettings>(c.result.settings.clone()) else {
        return format!("{}: the settings do not read as a watch's", c.label);
    };
    let what = match &s.command {
        Some(argv) => format!("the command {}", shell_words(argv)),
        None => {
            let pids: Vec<String> = s.pids.iter().map(u32::to_string).collect();
            format!("process {}", pids.join(", "))
        }
    };
    let threads = s
        .threads
        .map(|t| format!(", threads {t}"))
        .unwrap_or_default();
    let period = s.period_ns.map_or("inferred per thread".into(), ns);
    let deadline = s.deadline_ns.map_or("the period".into(), ns);
    format!(
        "{}: watched {what}{threads} on CPUs {}; period {period}, a miss is a response beyond {deadline}; up to {} misses drawn, each with the {} before it",
        c.label,
        s.cpus,
        s.snapshots,
        ns(s.window_ns)
    )
}

fn ns(v: u64) -> String {
    format_ns_as(v, NsStyle::Rounded)
}

fn optional(stat: &str, v: Option<u64>) -> Cell {
    v.map_or_else(|| Cell::stat(stat, "—"), |v| Cell::time(stat, "ns", v))
}

fn thread_row(label: &str, t: &ThreadFindings) -> Vec<Cell> {
    vec![
        Cell::text(label),
        Cell::stat("tid", t.tid.to_string()),
        Cell::stat("prio", t.prio.map_or("—".into(), priority_words)),
        Cell::stat("activations", t.activations.to_string()),
        optional("period_ns", t.period_ns),
        Cell::stat(
            "period_from",
            match (t.period_ns, t.period_inferred) {
                (None, _) => "unknown (too few releases)",
                (Some(_), true) => "inferred",
                (Some(_), false) => "given",
            },
        ),
        optional("deadline_ns", t.deadline_ns),
        Cell::stat("misses", t.misses.to_string()),
        Cell::stat("missed_periods", t.missed_periods.to_string()),
        Cell::stat("page_faults", t.page_faults.to_string()),
        Cell::stat("migrations", t.migrations.to_string()),
        Cell::stat("involuntary_switches", t.involuntary_switches.to_string()),
    ]
}

/// What delayed a thread's activations, the largest total first.
fn causes(prefix: &str, label: &str, t: &ThreadFindings) -> Table {
    let shown = t.causes.len().min(TOP_CAUSES);
    let more = if t.causes.len() > shown {
        format!(
            " (the {shown} largest of {}; the rest in the JSON)",
            t.causes.len()
        )
    } else {
        String::new()
    };
    let caption = if t.causes.is_empty() {
        format!("{label}: nothing traced delayed its activations")
    } else {
        format!("{label}: what delayed its activations — waiting to be switched in, preempted, or interrupted while running — most total time first{more}")
    };
    Table {
        id: format!("{prefix}-causes-{}", slug(label)),
        caption,
        head: [
            "what",
            "class",
            "priority",
            "activations delayed",
            "total",
            "worst",
        ]
        .map(String::from)
        .to_vec(),
        rows: t
            .causes
            .iter()
            .take(shown)
            .map(|c| {
                vec![
                    Cell::text(c.source.clone()),
                    Cell::stat("class", c.class.to_string()),
                    Cell::stat("prio", c.prio.map_or("—".into(), priority_words)),
                    Cell::stat("count", c.count.to_string()),
                    Cell::time("total_ns", "ns", c.total_ns),
                    Cell::time("max_ns", "ns", c.max_ns),
                ]
            })
            .collect(),
    }
}

/// Snapshot `i` of a result as a figure, numbered as the watch names its files (`miss-N`).
fn miss(prefix: &str, c: &Config, many: bool, i: usize, s: &Snapshot) -> Result<crate::Figure> {
    let id = if many {
        format!("{prefix}-{}-miss-{}", slug(&c.label), i + 1)
    } else {
        format!("{prefix}-miss-{}", i + 1)
    };
    snapshot::figure(&id, s, vec![c.context()])
}

/// What the trace says of itself: events lost or missing, the program's exit, notes.
fn findings_notes(c: &Config, w: &WatchFindings) -> Vec<Block> {
    let mut out = Vec::new();
    if !w.trace.events_missing.is_empty() {
        out.push(Block::Note(format!(
            "{}: not in this kernel, so not traced: {}",
            c.label,
            w.trace.events_missing.join(", ")
        )));
    }
    if let Some(exit) = &w.exit {
        out.push(Block::Text(format!(
            "{}: the program exited with {exit}",
            c.label
        )));
    }
    out.extend(
        w.notes
            .iter()
            .chain(&w.trace.recovered)
            .map(|n| Block::Note(format!("{}: {n}", c.label))),
    );
    out
}
