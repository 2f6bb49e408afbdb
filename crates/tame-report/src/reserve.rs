//! The reserve study (`tame bench reserve`): its tables as HTML tables, the client's CPU
//! share against background load (the per-step means) and over time (each window's
//! share). Reports an older study wrote hold no windows: no share over time is drawn for
//! them, and the page says so.

use tame_reserve_study::Report;

use crate::input::ReserveDoc;

use crate::error::Result;
use crate::model::Context;
use crate::page::{Block, Cell, Page, Section, Table};
use crate::plot::lines::{self, Axes};

/// What the page says in place of the share over time.
pub const NO_WINDOWS: &str = "the reserve study report holds no per-window data (only each series' mean rate, coefficient of variation and mean share per load step): no share over time is drawn — run `tame bench reserve`, which records each window, for that";

fn f(v: f64, digits: usize) -> String {
    format!("{v:.digits$}")
}

pub fn add(page: &mut Page, file: &str, doc: &ReserveDoc) -> Result<()> {
    let r = &doc.report;
    page.key_figures.push(Table {
        id: "reserve-key-figures".into(),
        caption: "reserve study: the machine and G (kernel rounds per second alone on the CPU)"
            .into(),
        head: [
            "kernel",
            "CPUs online",
            "client CPU",
            "period",
            "G before",
            "G after",
            "ordinary process alone",
            "floor S",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![vec![
            Cell::text(r.kernel.clone()),
            Cell::stat("online_cpus", r.online_cpus.to_string()),
            Cell::stat("cpu", r.cpu.to_string()),
            Cell::time("period_ns", "ns", r.period_ns),
            Cell::figure("g_before", r.g_before),
            Cell::figure("g_after", r.g_after),
            Cell::figure("shared_rate_before", r.shared_rate_before),
            Cell::figure("floor_cv", r.floor_cv),
        ]],
    });
    let has_windows = r.stability.iter().any(|x| !x.window_rates.is_empty());
    let mut blocks = Vec::new();
    if !has_windows {
        page.notes.push(format!("{file}: {NO_WINDOWS}"));
        blocks.push(Block::Note(NO_WINDOWS.to_string()));
    }
    for s in &r.skipped {
        page.warn("", file, None, format!("not measured: {s}"));
    }
    if r.interrupted {
        page.warn(
            "",
            file,
            None,
            "interrupted (Ctrl-C): the tables hold what was measured before".into(),
        );
    }
    let mut backends: Vec<String> = r.overhead.iter().map(|x| x.backend.to_string()).collect();
    backends.dedup();
    for b in &backends {
        blocks.push(Block::Table(Table {
            id: format!("reserve-overhead-{b}"),
            caption: format!("Table 1 ({b}): overhead per CPU share"),
            head: [
                "CPU share",
                "G",
                "client rate (rounds/s)",
                "client CPU (%)",
                "O_I",
                "rest rate (rounds/s)",
                "rest CPU (%)",
                "O_E",
                "O_E vs shared CPU",
            ]
            .map(String::from)
            .to_vec(),
            rows: r
                .overhead
                .iter()
                .filter(|x| &x.backend.to_string() == b)
                .map(|x| {
                    vec![
                        Cell::text(format!("{} %", f(x.share_ppm as f64 / 10_000.0, 1))),
                        Cell::stat("g", f(x.g, 0)),
                        Cell::stat("client_rate", f(x.client_rate, 0)),
                        Cell::stat("client_cpu", f(x.client_cpu * 100.0, 2)),
                        Cell::stat("o_i", f(x.o_i, 3)),
                        Cell::stat("rest_rate", f(x.rest_rate, 0)),
                        Cell::stat("rest_cpu", f(x.rest_cpu * 100.0, 2)),
                        Cell::stat("o_e", f(x.o_e, 3)),
                        Cell::stat("o_e_shared", f(x.o_e_shared, 3)),
                    ]
                })
                .collect(),
        }));
    }
    blocks.push(Block::Table(Table {
        id: "reserve-stability".into(),
        caption: format!(
            "Table 2: stability S (coefficient of variation of the client's rate over {} ms windows); floor (the kernel alone at SCHED_FIFO 1): {} over {} windows",
            r.stability_window_ns / 1_000_000,
            f(r.floor_cv, 4),
            r.floor_windows
        ),
        head: ["backend", "CPU share", "load", "windows", "mean rate (rounds/s)", "S"].map(String::from).to_vec(),
        rows: r
            .stability
            .iter()
            .map(|x| {
                vec![
                    Cell::text(x.backend.to_string()),
                    Cell::text(format!("{} %", f(x.share_ppm as f64 / 10_000.0, 1))),
                    Cell::text(x.load.clone()),
                    Cell::stat("windows", x.windows.to_string()),
                    Cell::stat("mean_rate", f(x.mean_rate, 0)),
                    Cell::stat("cv", f(x.cv, 4)),
                ]
            })
            .collect(),
    }));
    if !r.periodic.is_empty() {
        blocks.push(Block::Table(Table {
            id: "reserve-periodic".into(),
            caption: format!(
                "periodic client: a frame due every 100 ms needing {} ms of CPU; frame distance (ms)",
                r.frame_cpu_ns / 1_000_000
            ),
            head: ["reservation", "background processes", "frames", "min", "avg", "max"].map(String::from).to_vec(),
            rows: r
                .periodic
                .iter()
                .map(|x| {
                    vec![
                        Cell::text(x.config.clone()),
                        Cell::stat("background", x.background.to_string()),
                        Cell::stat("frames", x.frames.to_string()),
                        Cell::stat("min_ms", f(x.min_ms, 1)),
                        Cell::stat("avg_ms", f(x.avg_ms, 1)),
                        Cell::stat("max_ms", f(x.max_ms, 1)),
                    ]
                })
                .collect(),
        }));
    }
    let steps: Vec<lines::Line> = r
        .stability
        .iter()
        .filter(|x| x.load != "none" && !x.step_cpu.is_empty())
        .map(|x| {
            (
                format!(
                    "{} {} % under {} load",
                    x.backend,
                    f(x.share_ppm as f64 / 10_000.0, 1),
                    x.load
                ),
                x.step_cpu
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (i as f64, v * 100.0))
                    .collect(),
            )
        })
        .collect();
    let context = Context {
        label: "reserve study".into(),
        file: file.into(),
        environment: format!(
            "kernel {}, {} CPUs online, client on CPU {}, period {} ms; load average before / after: {} / {}",
            r.kernel,
            r.online_cpus,
            r.cpu,
            r.period_ns / 1_000_000,
            r.loadavg_before,
            r.loadavg_after
        ),
        command: doc.result.as_ref().map_or_else(
            || "not recorded in the report (bench/reserve.sh printed it beside its tables)".into(),
            |res| res.command_line.join(" "),
        ),
    };
    if has_windows {
        if let Some(fig) = shares_over_time(r, context.clone())? {
            blocks.push(Block::Figure(Box::new(fig)));
        }
    }
    if let Some(fig) = lines::figure(
        "reserve-load-steps",
        "reserve: the client's CPU share against background load",
        Axes {
            kind: "shares",
            x_label: "background processes on the client's CPU",
            y_label: "client CPU share (%)",
            x_tick: crate::plot::tick,
            y_tick: crate::plot::tick,
        },
        &steps,
        "The reserved client's mean CPU share at each step of background load (0, 1, … processes of computational or disk-I/O load): a flat line at the reserved share is a reservation that holds.".into(),
        vec![context],
    )? {
        blocks.push(Block::Figure(Box::new(fig)));
    }
    page.sections.push(Section {
        id: "reserve".into(),
        heading: "reserve: the scheduling-server study".into(),
        blocks,
    });
    Ok(())
}

/// Each stability series' share of G per window, one window after the other.
fn shares_over_time(r: &Report, context: Context) -> Result<Option<crate::plot::Figure>> {
    let window_s = r.stability_window_ns as f64 / 1e9;
    let series: Vec<lines::Line> = r
        .stability
        .iter()
        .filter(|x| !x.window_rates.is_empty() && r.g_before > 0.0)
        .map(|x| {
            (
                format!("{} {} load", x.backend, x.load),
                x.window_rates
                    .iter()
                    .enumerate()
                    .map(|(i, rate)| ((i as f64 + 0.5) * window_s, 100.0 * rate / r.g_before))
                    .collect(),
            )
        })
        .collect();
    lines::figure(
        "reserve-shares-over-time",
        "reserve: the client's CPU share in each window",
        Axes {
            kind: "timeline",
            x_label: "time since the series began (s)",
            y_label: "client CPU share of G (%)",
            x_tick: crate::plot::tick,
            y_tick: crate::plot::tick,
        },
        &series,
        format!(
            "The reserved client's share of the CPU in each {} ms window, one line per backend and kind of background load (under load, one more background process joins every few windows): S in Table 2 is how much these lines wander.",
            r.stability_window_ns / 1_000_000
        ),
        vec![context],
    )
}
